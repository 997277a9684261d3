package mailbox

// SetUnholdLocking sets the hook UnholdPlain calls as it turns to the lock
// (nil: none). Tests in this package run one at a time.
func SetUnholdLocking(f func()) { unholdLocking = f }

// FastHeld reports whether m's hold is a fast hold, taken or given back but
// not settled (locked).
func (m *Mailbox) FastHeld() bool { return m.hold == holdFast }
