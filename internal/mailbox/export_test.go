package mailbox

// SetUnholdLocking sets the hook UnholdPlain calls as it turns to the lock
// (nil: none). Tests in this package run one at a time.
func SetUnholdLocking(f func()) { unholdLocking = f }
