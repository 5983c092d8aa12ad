//go:build !linux

package fsutil

import (
	"io/fs"
	"time"
)

// Links reports ok false off Linux: the link count is not used there.
func Links(fs.FileInfo) (n uint64, changed time.Time, ok bool) { return 0, time.Time{}, false }
