package netconf

// fileStamp identifies one version of a file without reading it: its
// size, modification and change times, and inode. A file rewritten in
// place or replaced by another gets a new stamp.
type fileStamp struct {
	size  int64
	mtime int64
	ctime int64
	ino   uint64
}
