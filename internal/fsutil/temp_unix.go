//go:build unix

package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// holdTemp locks f, a temporary file just created, exclusively (flock),
// for as long as it is open, and reports whether its path still names it:
// false when [RemoveUnheld] removed it before the lock was taken, and the
// caller creates another.
func (r Root) holdTemp(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EINTR) {
			return false, &fs.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
	return r.SameFile(f, f.Name())
}

// RemoveUnheld removes path, a temporary file of a durable write (see
// [WriteDurable]) that a crash may have left, unless a write holds it:
// every write holds its temporary file's lock from its creation until it
// has renamed or removed it, in this process or in another. It reports
// whether it removed the file. A path that is gone, is not a regular
// file, or is held is left, and reports false with no error.
func (r Root) RemoveUnheld(path string) (bool, error) {
	f, err := r.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR) {
			return false, nil // a write in flight holds it
		}
		return false, &fs.PathError{Op: "flock", Path: path, Err: err}
	}
	// The lock is on the file opened; the path may name another by now
	// (a write that renamed this one away, and another that created the
	// name again).
	if same, err := r.SameFile(f, path); !same || err != nil {
		return false, err
	}
	if err := r.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
