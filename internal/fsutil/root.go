package fsutil

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// ErrSymlinked marks a path below a [Root] that is a symlink where a
// real directory must be: a write or removal there is refused, never
// made through the link.
var ErrSymlinked = errors.New("a symlink where a real directory must be")

// ErrNotBeneath marks a path given to a [Root] that is not below it.
var ErrNotBeneath = errors.New("not beneath the state root")

// Root is a directory below which the library's state is reached without
// following a symlink: every method takes absolute paths below it, and
// reaches each directory on the way from the root itself, one component
// at a time, refusing any that is a symlink ([ErrSymlinked], naming it),
// then acts on the last component relative to that directory (the *at(2)
// calls), never following it either. On Linux the walk is one
// openat2(2) with RESOLVE_NO_SYMLINKS where the kernel has it: over the
// whole path when no symlink lies above the root either (one call), else
// from the root with RESOLVE_BENEATH too; and openat(2) with O_NOFOLLOW
// per component where it has none. A link swapped in while a method runs
// is refused like one that was there before. The root itself may be a symlink, as operators mount a
// cache dir. Elsewhere each directory on the way is checked with
// lstat(2) before a path is used.
//
// The zero Root confines nothing: its methods take any absolute path,
// follow its directories as the os package does, and still never follow
// the last component. Each method reaches its directories afresh, so a
// root that is replaced (removed and made again) is used as it is now.
type Root struct{ dir string }

// NewRoot returns the Root of dir, which is made absolute and cleaned.
func NewRoot(dir string) Root {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Root{dir: filepath.Clean(dir)}
}

// Dir returns the root directory; "" for the zero Root.
func (r Root) Dir() string { return r.dir }

// rel returns path relative to the root, "." for the root itself, or an
// error matching [ErrNotBeneath].
func (r Root) rel(path string) (string, error) {
	path = filepath.Clean(path)
	switch {
	case path == r.dir:
		return ".", nil
	case r.dir == string(filepath.Separator):
		return strings.TrimPrefix(path, r.dir), nil
	case strings.HasPrefix(path, r.dir+string(filepath.Separator)):
		return path[len(r.dir)+1:], nil
	}
	return "", &fs.PathError{Op: "use", Path: path, Err: ErrNotBeneath}
}

// Check reports whether each of dirs, absolute paths below the root, is
// reached without a symlink: an error matching [ErrSymlinked] names the
// first component that is one. A directory that does not exist yet is
// fine (whoever makes it makes a real one), and so is a component that is
// a file, which a write below it fails on by itself.
func (r Root) Check(dirs ...string) error {
	for _, d := range dirs {
		if err := r.check(d); err != nil {
			return err
		}
	}
	return nil
}

// symlinked returns the error that refuses path, a symlink.
func symlinked(path string) error {
	return &fs.PathError{Op: "refusing to use", Path: path, Err: ErrSymlinked}
}
