package fsutil

import (
	"io/fs"
	"syscall"
	"time"
)

// Links returns the number of hard links to the file fi describes and
// when its inode last changed (a new link changes it), where the platform
// tells; ok is false elsewhere.
func Links(fi fs.FileInfo) (n uint64, changed time.Time, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, time.Time{}, false
	}
	return uint64(st.Nlink), time.Unix(st.Ctim.Sec, st.Ctim.Nsec), true //nolint:unconvert // Nlink's type varies by architecture
}
