//go:build !linux

package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// check lstats each component of dir below the root, refusing a symlink.
// Without the *at(2) calls of Linux it is made before a path is used, and
// does not close the window between the check and the use.
func (r Root) check(dir string) error {
	if r.dir == "" {
		return nil
	}
	rel, err := r.rel(dir)
	if err != nil || rel == "." {
		return err
	}
	p := r.dir
	for _, comp := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, comp)
		fi, err := os.Lstat(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return symlinked(p)
		}
		if err != nil || !fi.IsDir() {
			break // nothing below it to reach
		}
	}
	return nil
}

// checkParent checks the directory that holds path.
func (r Root) checkParent(path string) error { return r.check(filepath.Dir(filepath.Clean(path))) }

func (r Root) isDir(dir string) bool {
	fi, err := os.Lstat(dir)
	return r.check(dir) == nil && err == nil && fi.IsDir()
}

// OpenFile is os.OpenFile for path.
func (r Root) OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := r.checkParent(path); err != nil {
		return nil, err
	}
	return os.OpenFile(path, flag|noFollow, perm)
}

// Remove is os.Remove for path.
func (r Root) Remove(path string) error {
	if err := r.checkParent(path); err != nil {
		return err
	}
	return os.Remove(path)
}

// RemoveAll is os.RemoveAll for dir.
func (r Root) RemoveAll(dir string) error {
	if err := r.checkParent(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// Rename is os.Rename, from old to new.
func (r Root) Rename(old, new string) error {
	if err := errors.Join(r.checkParent(old), r.checkParent(new)); err != nil {
		return err
	}
	return os.Rename(old, new)
}

// RenameNoReplace is not supported here.
func (r Root) RenameNoReplace(string, string) error { return errors.ErrUnsupported }

// Link is os.Link: new becomes a hard link to old.
func (r Root) Link(old, new string) error {
	if err := errors.Join(r.checkParent(old), r.checkParent(new)); err != nil {
		return err
	}
	return os.Link(old, new)
}

// Lstat is os.Lstat for path.
func (r Root) Lstat(path string) (fs.FileInfo, error) {
	if err := r.checkParent(path); err != nil {
		return nil, err
	}
	return os.Lstat(path)
}

// ReadDir is os.ReadDir for dir.
func (r Root) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := r.check(dir); err != nil {
		return nil, err
	}
	return os.ReadDir(dir)
}

// SyncDir flushes the directory dir (see [SyncDir]).
func (r Root) SyncDir(dir string) error {
	if err := r.check(dir); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Mkdir is os.Mkdir for dir.
func (r Root) Mkdir(dir string, perm fs.FileMode) error {
	if err := r.checkParent(dir); err != nil {
		return err
	}
	return os.Mkdir(dir, perm)
}

// Chtimes is os.Chtimes for path.
func (r Root) Chtimes(path string, atime, mtime time.Time) error {
	if err := r.checkParent(path); err != nil {
		return err
	}
	return os.Chtimes(path, atime, mtime)
}

// SameFile reports whether path names the file f has open: false when
// path is gone.
func (r Root) SameFile(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	named, err := r.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(held, named), nil
}
