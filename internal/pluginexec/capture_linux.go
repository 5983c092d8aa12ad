package pluginexec

import (
	"os"

	"golang.org/x/sys/unix"
)

// memFile returns a new anonymous file in memory, closed on exec, that
// can be sealed (see limitCapture).
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// limitCapture gives the file in memory f the size n, which takes no
// memory until written, and seals that size: a write past it fails, and
// nothing can shrink it. What was written is then told by the offset
// (see written), not by the size.
func limitCapture(f *os.File, n int64) error {
	if err := f.Truncate(n); err != nil {
		return err
	}
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK)
	return err
}
