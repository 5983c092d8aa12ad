//go:build unix

package cni

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking lock on path (created when
// create is set) and returns its release. The lock goes with the process.
func lockFile(path string, create bool) (func(), error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// ownedByUs reports an error unless fi belongs to this process's user.
func ownedByUs(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not owned by uid %d", fi.Name(), os.Geteuid())
	}
	return nil
}
