package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory to reach names in it, not to read it.
const dirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// noOpenat2 is set once openat2(2) turned out missing (Linux before 5.6)
// or refused by a seccomp filter: the walk by component serves since.
var noOpenat2 atomic.Bool

// openDir returns a descriptor (O_PATH) of dir, an absolute path below
// the root or the root itself, reached without a symlink (see [Root]).
func (r Root) openDir(dir string) (int, error) {
	if r.dir == "" {
		fd, err := unix.Open(dir, dirFlags, 0)
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		return fd, nil
	}
	rel, err := r.rel(dir)
	if err != nil {
		return -1, err
	}
	if !noOpenat2.Load() && rel != "." {
		if fd, err := openWhole(filepath.Join(r.dir, rel)); fd >= 0 || err != nil {
			return fd, err
		}
	}
	rootfd, err := unix.Open(r.dir, dirFlags, 0) // the root may be a symlink
	if err != nil || rel == "." {
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: r.dir, Err: err}
		}
		return rootfd, nil
	}
	defer unix.Close(rootfd)
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(rootfd, rel, &unix.OpenHow{
			Flags:   dirFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOENT):
			return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		// Refused: the walk names the component that is a symlink.
	}
	return walk(rootfd, r.dir, rel)
}

// openWhole opens the directory at path when no component of it is a
// symlink, the common case, in one call. It returns -1 and no error when
// the resolution from the root must decide: a root that is (or lies
// below) a symlink fails here with ELOOP, and so does one below it.
func openWhole(path string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   dirFlags,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ENOENT):
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		noOpenat2.Store(true)
	}
	return -1, nil
}

// walk opens rel below the directory fd (at path), one component at a
// time, never following a symlink.
func walk(fd int, path, rel string) (int, error) {
	fd, err := unix.Dup(fd)
	if err != nil {
		return -1, &fs.PathError{Op: "dup", Path: path, Err: err}
	}
	for _, comp := range strings.Split(rel, string(filepath.Separator)) {
		path = filepath.Join(path, comp)
		next, err := openComponent(fd, comp)
		_ = unix.Close(fd)
		if err != nil {
			if errors.Is(err, ErrSymlinked) {
				return -1, symlinked(path)
			}
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// openComponent opens the directory name in the directory fd, refusing a
// symlink with ErrSymlinked. A name that was not a directory when it was
// opened and is one when it is looked at is opened again, a few times:
// it is being swapped.
func openComponent(fd int, name string) (int, error) {
	for range 3 {
		next, err := unix.Openat(fd, name, dirFlags|unix.O_NOFOLLOW, 0)
		if err == nil || !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			return next, err
		}
		var st unix.Stat_t
		switch serr := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case serr != nil:
			return -1, serr // gone since
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return -1, ErrSymlinked
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return -1, err
		}
	}
	return -1, ErrSymlinked
}

// isDir reports whether dir is a directory reached without a symlink.
func (r Root) isDir(dir string) bool {
	fd, err := r.openDir(dir)
	if err == nil {
		_ = unix.Close(fd)
	}
	return err == nil
}

func (r Root) check(dir string) error {
	fd, err := r.openDir(dir)
	switch {
	case err == nil:
		return unix.Close(fd)
	case errors.Is(err, ErrSymlinked) || errors.Is(err, ErrNotBeneath):
		return err
	}
	return nil // missing, or a file on the way: nothing to write through
}

// at opens the directory that holds path, for an *at(2) call on its last
// component, which it returns too.
func (r Root) at(path string) (int, string, error) {
	path = filepath.Clean(path)
	fd, err := r.openDir(filepath.Dir(path))
	return fd, filepath.Base(path), err
}

// at2 is at for the two paths of a rename or link, with one descriptor
// when both are in one directory; the caller closes both (see close2).
func (r Root) at2(old, new string) (ofd int, oname string, nfd int, nname string, err error) {
	if ofd, oname, err = r.at(old); err != nil {
		return -1, "", -1, "", err
	}
	if filepath.Dir(filepath.Clean(old)) == filepath.Dir(filepath.Clean(new)) {
		return ofd, oname, ofd, filepath.Base(new), nil
	}
	if nfd, nname, err = r.at(new); err != nil {
		_ = unix.Close(ofd)
		return -1, "", -1, "", err
	}
	return ofd, oname, nfd, nname, nil
}

// close2 closes what at2 opened.
func close2(ofd, nfd int) {
	_ = unix.Close(ofd)
	if nfd != ofd {
		_ = unix.Close(nfd)
	}
}

// OpenFile is os.OpenFile for path, whose last component is never
// followed either (O_NOFOLLOW).
func (r Root) OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	dfd, name, err := r.at(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Clean(path)), nil
}

// Remove is os.Remove for path: a file, or an empty directory.
func (r Root) Remove(path string) error {
	dfd, name, err := r.at(path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	err = unix.Unlinkat(dfd, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// RemoveAll is os.RemoveAll for dir, whose entries are reached through
// it, never through a symlink.
func (r Root) RemoveAll(dir string) error {
	des, err := r.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil && !errors.Is(err, unix.ENOTDIR) {
		return err
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		if de.IsDir() {
			err = r.RemoveAll(p)
		} else {
			err = r.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := r.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Rename is os.Rename, from old to new.
func (r Root) Rename(old, new string) error { return r.rename(old, new, 0) }

// RenameNoReplace renames old to new only where new does not exist
// (renameat2(2)'s RENAME_NOREPLACE): an error matching fs.ErrExist
// otherwise.
func (r Root) RenameNoReplace(old, new string) error {
	return r.rename(old, new, unix.RENAME_NOREPLACE)
}

func (r Root) rename(old, new string, flags uint) error {
	ofd, oname, nfd, nname, err := r.at2(old, new)
	if err != nil {
		return err
	}
	defer close2(ofd, nfd)
	if flags == 0 {
		err = unix.Renameat(ofd, oname, nfd, nname)
	} else {
		err = unix.Renameat2(ofd, oname, nfd, nname, flags)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
	}
	return nil
}

// Link is os.Link: new becomes a hard link to old.
func (r Root) Link(old, new string) error {
	ofd, oname, nfd, nname, err := r.at2(old, new)
	if err != nil {
		return err
	}
	defer close2(ofd, nfd)
	if err := unix.Linkat(ofd, oname, nfd, nname, 0); err != nil {
		return &os.LinkError{Op: "link", Old: old, New: new, Err: err}
	}
	return nil
}

// linkFD gives fd, an open file with no name (O_TMPFILE), the name path.
func (r Root) linkFD(fd int, path string) error {
	dfd, name, err := r.at(path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Linkat(unix.AT_FDCWD, proc, dfd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &fs.PathError{Op: "link", Path: path, Err: err}
	}
	return nil
}

// openTmpfile opens a new file in dir that has no name (O_TMPFILE).
func (r Root) openTmpfile(dir string) (int, error) {
	dfd, err := r.openDir(dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// Lstat is os.Lstat for path.
func (r Root) Lstat(path string) (fs.FileInfo, error) {
	dfd, name, err := r.at(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Clean(path))
	defer f.Close()
	return f.Stat()
}

// SameFile reports whether path names the file f has open: false when
// path is gone.
func (r Root) SameFile(f *os.File, path string) (bool, error) {
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return false, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	dfd, name, err := r.at(path)
	if err == nil {
		err = unix.Fstatat(dfd, name, &named, unix.AT_SYMLINK_NOFOLLOW)
		_ = unix.Close(dfd)
		if err != nil {
			err = &fs.PathError{Op: "lstat", Path: path, Err: err}
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return held.Dev == named.Dev && held.Ino == named.Ino, nil
}

// ReadDir is os.ReadDir for dir: its entries sorted by name.
func (r Root) ReadDir(dir string) ([]fs.DirEntry, error) {
	f, err := r.openDirFile(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// SyncDir flushes the directory dir (see [SyncDir]).
func (r Root) SyncDir(dir string) error {
	f, err := r.openDirFile(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: serr}
	}
	return cerr
}

// openDirFile opens dir for reading.
func (r Root) openDirFile(dir string) (*os.File, error) {
	dfd, err := r.openDir(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Clean(dir)), nil
}

// Mkdir is os.Mkdir for dir.
func (r Root) Mkdir(dir string, perm fs.FileMode) error {
	dfd, name, err := r.at(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Mkdirat(dfd, name, uint32(perm.Perm())); err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return nil
}

// Chtimes is os.Chtimes for path, whose last component is never
// followed either.
func (r Root) Chtimes(path string, atime, mtime time.Time) error {
	dfd, name, err := r.at(path)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	return nil
}
