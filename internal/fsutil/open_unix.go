//go:build unix

package fsutil

import (
	"os"
	"syscall"
)

// openNonBlocking opens path read-only with O_NONBLOCK, so that a FIFO
// never blocks the open, and with O_NOFOLLOW unless follow is set.
func openNonBlocking(path string, follow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= noFollow
	}
	return os.OpenFile(path, flags, 0)
}

// noFollow is O_NOFOLLOW where there is one.
const noFollow = syscall.O_NOFOLLOW
