//go:build !linux

package netconf

import "io/fs"

// stampOf falls back to size and modification time where the change time
// and inode are not portable.
func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
