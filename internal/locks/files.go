package locks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// ErrBusy is what [Files.TryLock] returns when another holder, in this
// process or another, holds the key's lock.
var ErrBusy = errors.New("locks: held by another holder")

// ErrUnavailable is matched by every [*UnavailableError]: a lock that
// could not be had for a file system reason, not because another holder
// has it.
var ErrUnavailable = errors.New("locks: lock files unavailable")

// UnavailableError is the failure of a lock whose file could not be made,
// opened or locked: a read-only or full file system, an I/O error, a
// lock dir that cannot be made, a file system without flock(2). It
// matches [ErrUnavailable] and unwraps to the cause.
type UnavailableError struct {
	Path string // the lock file, or its directory
	Err  error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("locks: lock file %s unavailable: %v", e.Path, e.Err)
}

// Is reports whether target is [ErrUnavailable].
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

func unavailable(path string, err error) error {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	return &UnavailableError{Path: path, Err: err}
}

// Names of the node gate's two files in a [Files] directory. A key never
// starts with a dot (container IDs start with a letter or a digit), so
// they never meet a key's file.
const (
	nodeFile = ".node" // held shared by pod operations, exclusively by a writer
	turnFile = ".turn" // the turnstile a waiting writer closes to new readers
)

// Files is a directory of lock files that every process on the node
// opens, so that its locks hold across processes and across the holders
// of one process alike (see the package doc, "File locks"). The zero
// value is not usable: see [NewFiles].
type Files struct {
	root     fsutil.Root // dir is reached below it, never through a symlink
	dir      string
	owner    string
	takeover *Takeover // nil: none (see SetTakeover)
	// spares are key files retired when their key guarded nothing any
	// more, for the next new key to reuse (see openKey); nil: none.
	spares *fsutil.Spares
}

// NewFiles returns the lock files under dir, made on first use, reached
// below root and never through a symlink there (see [fsutil.Root]): a
// symlink on the way fails a lock with an [*UnavailableError] matching
// [fsutil.ErrSymlinked]. The zero Root confines nothing. Its releases are
// stamped with a new owner, which names this process and is live until
// [Files.Retire].
func NewFiles(dir string, root fsutil.Root) *Files {
	var tag [6]byte
	_, _ = rand.Read(tag[:]) // never fails (crypto/rand's doc)
	fl := &Files{root: root, dir: dir, owner: fmt.Sprintf("%d-%x", os.Getpid(), tag)}
	if reuseFiles {
		fl.spares = fsutil.NewSpares(root)
	}
	liveOwners.Store(fl.owner, struct{}{})
	return fl
}

// Owner returns the owner that this holder's releases stamp.
func (fl *Files) Owner() string { return fl.owner }

// FileLock is one held lock of a [Files]: a key's (exclusive) or the
// node gate's (shared or exclusive).
type FileLock struct {
	f    *os.File
	path string
	fl   *Files
}

// Lock takes key's lock exclusively, waiting while another holder has
// it. It returns ctx's error, holding nothing, when ctx ends first.
func (fl *Files) Lock(ctx context.Context, key string) (*FileLock, error) {
	return fl.lockKey(ctx, key, true)
}

// TryLock takes key's lock exclusively if nobody holds it, and returns
// [ErrBusy] otherwise.
func (fl *Files) TryLock(key string) (*FileLock, error) {
	return fl.lockKey(context.Background(), key, false)
}

// lockKey takes key's lock. A key's file is removed by a holder (see
// [FileLock.Unlock]); a waiter that was handed the lock of a file
// removed since it opened it opens the file again.
func (fl *Files) lockKey(ctx context.Context, key string, wait bool) (*FileLock, error) {
	if key == "" || strings.HasPrefix(key, ".") || strings.ContainsRune(key, os.PathSeparator) {
		return nil, fmt.Errorf("locks: bad key %q", key)
	}
	path := filepath.Join(fl.dir, key)
	for {
		f, reused, err := fl.openKey(path)
		if err != nil {
			return nil, err
		}
		if err := fl.waitKey(ctx, f, key, path, wait); err != nil {
			_ = f.Close() // releases nothing: the lock was not taken
			if errors.Is(err, errReopen) {
				continue
			}
			return nil, err
		}
		if same, err := fl.root.SameFile(f, path); err != nil || same {
			if err != nil {
				_ = f.Close()
				return nil, unavailable(path, err)
			}
			if reused {
				clearStamp(f) // a former key's release
			}
			if fl.takeover != nil {
				// Who holds it, for a waiter that may take it over (see
				// takeover.go); a stamp that cannot be written leaves the
				// lock to be waited for, as before.
				writeStampAt(f, holderAt, fl.owner, time.Now())
			}
			return &FileLock{f: f, path: path, fl: fl}, nil
		}
		_ = f.Close() // a removed file's lock guards nothing
	}
}

// RLockNode takes the node gate shared, as every pod operation does. It
// waits while a writer holds the gate or holds new readers back (see
// [Files.LockNode]), and returns ctx's error, holding nothing, when ctx
// ends first.
func (fl *Files) RLockNode(ctx context.Context) (*FileLock, error) {
	turn, err := fl.open(filepath.Join(fl.dir, turnFile))
	if err != nil {
		return nil, err
	}
	defer turn.Close() // closing it releases the turnstile
	if err := flockWait(ctx, turn, lockShared, true); err != nil {
		return nil, err
	}
	return fl.lockNode(ctx, lockShared, true)
}

// LockNode takes the node gate exclusively when no reader holds it;
// otherwise it closes the turnstile to new readers and waits at most
// hold for the readers in flight to leave. It returns [ErrBusy] when they
// do not, having opened the turnstile again, and ctx's error when ctx
// ends first; either way it holds nothing. A caller that keeps trying
// pauses between tries, so that the readers held back get in (see
// [NodePause]).
func (fl *Files) LockNode(ctx context.Context, hold time.Duration) (*FileLock, error) {
	if l, err := fl.lockNode(ctx, lockExclusive, false); err == nil || !errors.Is(err, ErrBusy) {
		return l, err
	}
	return fl.lockNodeHolding(ctx, hold)
}

// NodePause is how long a caller of [Files.LockNode] that got ErrBusy
// waits before it tries again: long enough for the readers it held back,
// which poll, to get in.
const NodePause = 3 * pollMost

// lockNodeHolding closes the turnstile and waits at most d for the
// readers in flight to leave.
func (fl *Files) lockNodeHolding(ctx context.Context, d time.Duration) (*FileLock, error) {
	turn, err := fl.open(filepath.Join(fl.dir, turnFile))
	if err != nil {
		return nil, err
	}
	defer turn.Close() // opens the turnstile again
	if err := flockWait(ctx, turn, lockExclusive, true); err != nil {
		return nil, err
	}
	return fl.lockNodeWithin(ctx, d)
}

// lockNodeWithin waits at most d for the node gate exclusively, and
// returns ErrBusy when d passes first.
func (fl *Files) lockNodeWithin(ctx context.Context, d time.Duration) (*FileLock, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, d, ErrBusy)
	defer cancel()
	l, err := fl.lockNode(wctx, lockExclusive, true)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), ErrBusy) {
		return nil, ErrBusy
	}
	return l, err
}

func (fl *Files) lockNode(ctx context.Context, how int, wait bool) (*FileLock, error) {
	path := filepath.Join(fl.dir, nodeFile)
	f, err := fl.open(path)
	if err != nil {
		return nil, err
	}
	if err := flockWait(ctx, f, how, wait); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &FileLock{f: f, path: path, fl: fl}, nil
}

// openKey opens a key's lock file at path. Where there is none, it puts
// a spare in its place (see [fsutil.Spares]), which costs a rename where
// creating a file costs far more on some file systems, and reports that
// it did: the file's stamps are then a former key's. A spare is renamed
// only where no file is (renameat2's RENAME_NOREPLACE), so a file that
// another holder made meanwhile, and may hold, is never replaced.
func (fl *Files) openKey(path string) (*os.File, bool, error) {
	if fl.spares == nil {
		f, err := fl.open(path)
		return f, false, err
	}
	f, err := fl.openExistingLockFile(path)
	if err == nil {
		return f, false, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		if spare := fl.spares.Take(fl.dir); spare != "" {
			if fl.root.RenameNoReplace(spare, path) != nil {
				fl.spares.Return(spare) // made meanwhile, or the rename is not supported here
			} else if f, err := fl.openExistingLockFile(path); err == nil {
				return f, true, nil
			}
		}
	}
	f, err = fl.open(path)
	return f, false, err
}

// reuseFiles says whether a key's lock file is taken from the spares
// (see [Files.openKey]): renameat2(2) can put a spare in place without
// replacing a file made meanwhile. Elsewhere lock files are created and
// removed.
const reuseFiles = runtime.GOOS == "linux"

// openLockFile opens (and makes) a lock file.
func (fl *Files) openLockFile(path string) (*os.File, error) {
	return fl.root.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// openExistingLockFile opens an existing lock file for writing.
func (fl *Files) openExistingLockFile(path string) (*os.File, error) {
	return fl.root.OpenFile(path, os.O_RDWR, 0)
}

// open opens path for locking, making the directory first when it is
// missing. Where the file cannot be opened for writing (a read-only file
// system, or one that turned read-only after an I/O error), an existing
// file is opened read-only: flock(2) needs no write access, so the lock
// still holds; only its stamp is not written. Every failure is an
// [*UnavailableError].
func (fl *Files) open(path string) (*os.File, error) {
	f, err := fl.openLockFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := fl.root.MkdirAll(fl.dir, 0o700); err != nil {
			return nil, unavailable(fl.dir, err)
		}
		f, err = fl.openLockFile(path)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if rf, rerr := fl.root.OpenFile(path, os.O_RDONLY, 0); rerr == nil {
			return rf, nil
		}
	}
	if err != nil {
		return nil, unavailable(path, err)
	}
	return f, nil
}

// A waiter polls for a lock, first after pollFirst and then at doubling
// intervals up to pollMost.
const pollFirst, pollMost = 500 * time.Microsecond, 20 * time.Millisecond

// flockWait takes f's lock the way how says; when another holder has it,
// it waits, polling, until it gets it or ctx ends, or returns ErrBusy at
// once when wait is false.
func flockWait(ctx context.Context, f *os.File, how int, wait bool) error {
	pause := pollFirst
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ok, err := tryFlock(f, how)
		switch {
		case err != nil:
			return unavailable(f.Name(), fmt.Errorf("flock: %w", err))
		case ok:
			return nil
		case !wait:
			return ErrBusy
		}
		if timer == nil {
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		pause = min(2*pause, pollMost)
	}
}

// Unlock releases the lock. A key's lock is stamped with its owner and
// the time first, unless remove is set: then its file is removed, which a
// holder does once the key guards nothing any more. Unlock must be called
// exactly once.
func (l *FileLock) Unlock(remove bool) {
	if remove {
		// Kept for a new key to reuse, or removed; a file left guards
		// nothing, and the next holder removes it.
		if kept, err := l.fl.spares.Retire(l.path); !kept && err == nil {
			_ = l.fl.root.Remove(l.path)
		}
	} else if filepath.Base(l.path) != nodeFile {
		writeStamp(l.f, l.fl.owner, time.Now())
	}
	unflock(l.f) // for a child that inherited the file too (see Inheritable)
	_ = l.f.Close()
}

// Inheritable returns the lock's open file, for a child process to
// inherit (see pluginexec.WithInherited): the child then holds the lock
// with this holder, and alone once this holder's process dies, until it
// exits. Unlock releases it for both. The file is the lock's: the caller
// neither closes nor uses it.
func (l *FileLock) Inheritable() *os.File { return l.f }

// Keys lists the keys that have a lock file: held now, or released and
// stamped.
func (fl *Files) Keys() ([]string, error) {
	ents, err := fl.root.ReadDir(fl.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locks: %w", err)
	}
	keys := make([]string, 0, len(ents))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && e.Type().IsRegular() {
			keys = append(keys, e.Name())
		}
	}
	return keys, nil
}

// Recent returns the keys whose lock file changed at since or later:
// held, or released since then. Each comes with its stamp, or the zero
// Stamp when it has none (its first holder holds it now). A file that
// goes while Recent reads the directory is left out.
func (fl *Files) Recent(since time.Time) (map[string]Stamp, error) {
	ents, err := fl.root.ReadDir(fl.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locks: %w", err)
	}
	out := make(map[string]Stamp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().Before(since) {
			continue // gone, or not changed since
		}
		f, err := fl.root.OpenFile(filepath.Join(fl.dir, e.Name()), os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		out[e.Name()] = readStamp(f)
		_ = f.Close()
	}
	return out, nil
}
