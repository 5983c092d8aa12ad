//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package locks

import (
	"errors"
	"os"
	"syscall"
)

const (
	lockShared    = syscall.LOCK_SH
	lockExclusive = syscall.LOCK_EX
)

// tryFlock takes f's flock(2) lock without waiting; false when another
// open file description holds it. flock locks belong to the open file,
// so two holders in one process exclude each other as two processes do,
// and a process that dies releases its locks with its files.
func tryFlock(f *os.File, how int) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return false, err
		}
	}
}

// unflock releases f's flock(2) lock, for every process that shares f's
// open file (a child that inherited it).
func unflock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// processAlive reports whether process pid runs (or cannot be told not
// to: a process of another user answers EPERM).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
