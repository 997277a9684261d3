package kafka

// MetaCovers reports whether the offset map in a commit's metadata, written
// for the committed offset base, says offset was done. For tests.
func MetaCovers(meta string, base, offset int64) bool {
	d, ok := parseMeta(meta)
	return ok && d.base == base && d.has(offset)
}
