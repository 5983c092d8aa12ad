package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SyncDir flushes the directory dir, so that the names created, renamed or
// removed in it survive a power loss. It is the second half of a durable
// write: the file itself is synced before it is renamed into dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("sync %s: %w", dir, serr)
	}
	return cerr
}

// ErrNotDurable marks a durable write whose file took its name but whose
// directory could not be synced afterwards: the new file is in place, and
// may not survive a power loss. The caller decides whether to keep it.
var ErrNotDurable = errors.New("in place, but the directory sync failed")

// WriteDurable writes data to a new temporary file in dir (mode 0600),
// syncs it, renames it to name in dir, and syncs dir, so that after a
// power loss name holds either its previous content or data, and never a
// torn write. tmp names the temporary file: a pattern for os.CreateTemp
// when it holds a "*", else the exact name, replaced if it exists (the
// caller serializes writes that share it). dir must exist.
//
// A failure before the rename removes the temporary file and leaves name
// as it was. A failure of the final directory sync matches
// [ErrNotDurable]: name then holds data.
func (r Root) WriteDurable(dir, name, tmp string, data []byte) error {
	_, err := r.writeDurable(dir, name, tmp, data, "")
	return err
}

// WriteDurableLinked is [WriteDurable] that also makes link, a path on
// the same file system, a hard link to the new file before the file takes
// its name, so that link holds data whatever happens to name meanwhile
// (another process may remove or replace it at any time). An existing
// link is left as it is. It reports whether it made link: a failure
// before the rename removes the link it made too, and one that matches
// [ErrNotDurable] leaves it. link's directory must exist; syncing it is
// the caller's.
func (r Root) WriteDurableLinked(dir, name, tmp string, data []byte, link string) (linked bool, err error) {
	return r.writeDurable(dir, name, tmp, data, link)
}

func (r Root) writeDurable(dir, name, tmp string, data []byte, link string) (bool, error) {
	f, err := r.createTemp(dir, tmp)
	if err != nil {
		return false, err
	}
	return r.writeSyncRename(f, filepath.Join(dir, name), data, link)
}

// TestHookTempHeld, when set, is called with the path of every temporary
// file of a durable write once the write holds it, before it writes: a
// test stops a write there to kill its process in the middle of it. Only
// tests set it, before any write.
var TestHookTempHeld func(path string)

// maxTempAttempts bounds how often a write creates its temporary file
// again after [RemoveUnheld] removed the one it had just created.
const maxTempAttempts = 8

// createTemp creates the temporary file of a durable write (tmp as in
// [WriteDurable]) and holds its lock (see holdTemp) until it is closed,
// so that [RemoveUnheld] leaves it alone. Where it can, it makes the file
// unnamed, locks it and then names it (see createUnnamedTemp), so that a
// sweep never meets it unlocked. Elsewhere, a file removed between its
// creation and the lock is created again.
func (r Root) createTemp(dir, tmp string) (*os.File, error) {
	if f, err := r.createUnnamedTemp(dir, tmp); !errors.Is(err, errNoUnnamed) {
		if err == nil && TestHookTempHeld != nil {
			TestHookTempHeld(f.Name())
		}
		return f, err
	}
	for range maxTempAttempts {
		f, err := r.createNamedTemp(dir, tmp)
		if err != nil {
			return nil, err
		}
		held, err := r.holdTemp(f)
		if held {
			if TestHookTempHeld != nil {
				TestHookTempHeld(f.Name())
			}
			return f, nil
		}
		_ = f.Close()
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("create a temporary file %s in %s: removed %d times before it was locked", tmp, dir, maxTempAttempts)
}

// createNamedTemp creates the temporary file of a durable write with a
// name (tmp as in [WriteDurable]).
func (r Root) createNamedTemp(dir, tmp string) (*os.File, error) {
	if !strings.Contains(tmp, "*") {
		return r.OpenFile(filepath.Join(dir, tmp), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	for range maxNameAttempts {
		f, err := r.OpenFile(filepath.Join(dir, tempName(tmp)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, &fs.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: fs.ErrExist}
}

// maxNameAttempts bounds how many names a temporary file of a pattern
// tries before it gives up: each is random, so one taken is rare.
const maxNameAttempts = 100

// tempName returns a name for pattern, its last "*" replaced by a
// random number.
func tempName(pattern string) string {
	i := strings.LastIndex(pattern, "*")
	return pattern[:i] + strconv.FormatUint(uint64(rand.Uint32()), 10) + pattern[i+1:] //nolint:gosec // a name, not a secret
}

func (r Root) writeSyncRename(tmp *os.File, path string, data []byte, link string) (linked bool, err error) {
	defer func() {
		if err != nil {
			// Undo what the write made; nothing else can have its names.
			_ = r.Remove(tmp.Name())
			if linked {
				_ = r.Remove(link)
				linked = false
			}
		}
		// Only now, with the file renamed or removed, its lock goes.
		_ = tmp.Close()
	}()
	if _, err = tmp.Write(data); err != nil {
		return false, err
	}
	if err = tmp.Sync(); err != nil {
		return false, err
	}
	if link != "" {
		switch err = r.Link(tmp.Name(), link); {
		case err == nil:
			linked = true
		case errors.Is(err, fs.ErrExist):
			err = nil
		default:
			return false, err
		}
	}
	if err = r.Rename(tmp.Name(), path); err != nil {
		return linked, err
	}
	if serr := r.SyncDir(filepath.Dir(path)); serr != nil {
		return linked, fmt.Errorf("%w: %w", ErrNotDurable, serr)
	}
	return linked, nil
}

// MkdirAll is os.MkdirAll for dir: the directories on the way below the
// root are made as real ones, never through a symlink; the root itself
// is made as os.MkdirAll makes it.
func (r Root) MkdirAll(dir string, perm os.FileMode) error { return r.mkdirAll(dir, perm, false) }

// MkdirAllDurable is [Root.MkdirAll] that also syncs the parent of every
// directory it creates, so that the new directories survive a power
// loss. It does nothing when dir exists.
func (r Root) MkdirAllDurable(dir string, perm os.FileMode) error { return r.mkdirAll(dir, perm, true) }

func (r Root) mkdirAll(dir string, perm os.FileMode, durable bool) error {
	dir = filepath.Clean(dir)
	if r.isDir(dir) {
		return nil
	}
	parent := filepath.Dir(dir)
	switch {
	case parent == dir:
		return nil // a file system's root
	case dir == r.dir && durable: // the root, which may be a symlink
		return mkdirAllDurable(dir, perm)
	case dir == r.dir:
		return os.MkdirAll(dir, perm)
	}
	if err := r.mkdirAll(parent, perm, durable); err != nil {
		return err
	}
	if err := r.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if !durable {
		return nil
	}
	return r.SyncDir(parent)
}

// mkdirAllDurable is [Root.MkdirAllDurable] for a path that is followed
// as the os package follows it: a root's own.
func mkdirAllDurable(dir string, perm os.FileMode) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllDurable(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(parent)
}
