package pluginexec

import (
	"os"

	"golang.org/x/sys/unix"
)

// memFile returns a new anonymous file in memory, closed on exec.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
