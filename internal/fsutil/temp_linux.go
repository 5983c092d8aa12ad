package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errNoUnnamed is what createUnnamedTemp returns where the file system
// or the kernel makes no unnamed file (O_TMPFILE), or /proc is missing:
// the caller creates a named one instead.
var errNoUnnamed = errors.New("no unnamed temporary files here")

// createUnnamedTemp makes the temporary file of a durable write (tmp as
// in [WriteDurable]) with no name (O_TMPFILE), locks it, and only then
// links it into dir under its name: the file never has a name unlocked,
// so [RemoveUnheld] can never remove it before its write holds it. A
// fixed name that exists is a crash's leftover (the caller serializes
// writes that share it), and is replaced.
func (r Root) createUnnamedTemp(dir, tmp string) (*os.File, error) {
	fd, err := r.openUnnamed(dir)
	if err != nil {
		return nil, err
	}
	f, err := r.linkUnnamed(fd, dir, tmp)
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return f, nil
}

// openUnnamed makes an unnamed file in dir, and locks it.
func (r Root) openUnnamed(dir string) (int, error) {
	fd, err := r.openTmpfile(dir)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL):
		return -1, errNoUnnamed
	case err != nil:
		return -1, err
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX) // nobody else can reach an unnamed file: it never waits
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, &fs.PathError{Op: "flock", Path: dir, Err: err}
	}
	return fd, nil
}

// linkUnnamed names fd, an unnamed file in dir, tmp (a pattern when it
// holds a "*"), through /proc, and returns it as a file of that name.
func (r Root) linkUnnamed(fd int, dir, tmp string) (*os.File, error) {
	pattern := strings.Contains(tmp, "*")
	for range maxNameAttempts {
		name := tmp
		if pattern {
			name = tempName(tmp)
		}
		path := filepath.Join(dir, name)
		err := r.linkFD(fd, path)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case errors.Is(err, unix.EEXIST) && !pattern:
			if rerr := r.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, rerr
			}
		case errors.Is(err, unix.EEXIST):
		case errors.Is(err, unix.ENOENT) && r.isDir(dir):
			return nil, errNoUnnamed // no /proc to link through
		default:
			return nil, err
		}
	}
	return nil, &fs.PathError{Op: "link", Path: filepath.Join(dir, tmp), Err: fs.ErrExist}
}
