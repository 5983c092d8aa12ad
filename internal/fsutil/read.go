package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

var (
	// ErrNotRegular marks a path that is not a regular file: a FIFO, a
	// device, a socket, a directory, or (when symlinks are not followed)
	// a symlink.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge marks a file larger than the caller's limit.
	ErrTooLarge = errors.New("file too large")
)

// ReadRegular returns the content of the file at path. It refuses, with an
// *fs.PathError wrapping [ErrNotRegular], anything but a regular file, and
// with one wrapping [ErrTooLarge] a file of more than limit bytes; it never
// reads more than limit+1 bytes. With follow, a symlink is followed but
// its target must be a regular file; without, a symlink is refused.
func ReadRegular(path string, limit int64, follow bool) ([]byte, error) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	f, err := openNonBlocking(path, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been replaced between the stat and the open.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
	}
	return data, nil
}

func checkInfo(path string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (mode %s)", ErrNotRegular, fi.Mode().Type())}
	}
	if fi.Size() > limit {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, fi.Size(), limit)}
	}
	return nil
}
