//go:build !unix

package fsutil

import "os"

// openNonBlocking opens path read-only. Platforms without O_NONBLOCK rely
// on the stat before and after the open.
func openNonBlocking(path string, _ bool) (*os.File, error) {
	return os.Open(path)
}

// noFollow is O_NOFOLLOW where there is one.
const noFollow = 0
