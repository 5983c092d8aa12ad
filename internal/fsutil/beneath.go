package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrSymlinked marks a path below a state root that is a symlink where a
// real directory must be (see [RealDirs]).
var ErrSymlinked = errors.New("a symlink where a real directory must be")

// RealDirs checks that no directory rels names below root, nor any on
// the way to it, is a symlink: a write there then never goes through a
// link out of root (root itself may be one, as operators mount a cache
// dir). A path that does not exist yet is fine: whoever makes it makes a
// real directory; so is one that is neither a directory nor a symlink,
// which a write below it fails on by itself. It returns an *fs.PathError
// matching [ErrSymlinked] that names the first symlink, or the error of
// an lstat that failed otherwise.
//
// It is a check made before a write, so that a state dir that an operator
// or another program replaced with a link is refused, never written
// through; it does not close the window between the check and the write
// against a writer racing it, which needs the privileges that could write
// the state directly.
func RealDirs(root string, rels ...string) error {
	seen := make(map[string]bool, 2*len(rels))
	for _, rel := range rels {
		p := root
		for _, comp := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
			p = filepath.Join(p, comp)
			if seen[p] {
				continue
			}
			seen[p] = true
			fi, err := os.Lstat(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return err
			}
			if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return &fs.PathError{Op: "refusing to use", Path: p, Err: ErrSymlinked}
			}
			if err != nil || !fi.IsDir() {
				break // nothing below it to reach
			}
		}
	}
	return nil
}
