package locks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// This file is how a key's lock that no live holder keeps is taken over.
// A key's lock file is inherited by the plugins its holder runs (see
// [FileLock.Inheritable]), so that a plugin of a holder that was killed
// keeps the key locked while it runs. A plugin's child that inherits
// every descriptor (a daemon started by a plugin written in C or shell
// that forks without closing them) then holds the lock for as long as it
// lives. So once the process of the holder that took the lock has ended
// and its lock is older than the takeover bound, a
// waiter replaces the lock file with a new one and locks that: the old
// file, and whoever still holds it, guard nothing any more.

// takeoverFile is the dot file that serializes the takeovers of every
// key: two waiters never both replace one lock file.
const takeoverFile = ".takeover"

// holderAt is the offset of the holder stamp in a key's lock file: who
// holds the lock now (or held it last), and since when. The release
// stamp is at offset 0.
const holderAt = stampLen

// takeoverCheck is how often a waiter looks whether the lock it waits
// for is held by no live holder.
const takeoverCheck = 250 * time.Millisecond

// errReopen tells lockKey to open the key's file again: it was replaced.
var errReopen = errors.New("locks: the lock file was replaced")

// Takeover is when a waiter takes a key's lock over (see the package
// doc): After returns how long after it took the lock a holder that is
// gone may keep it (the longest a plugin it ran may run); Log, when not
// nil, is told of each takeover with the holder that was gone.
type Takeover struct {
	After func() time.Duration
	Log   func(key string, gone Stamp)
}

// SetTakeover makes the waiters for a key's lock take it over as t says.
// Without it, a lock is never taken over. Call it before any lock is
// taken.
func (fl *Files) SetTakeover(t Takeover) { fl.takeover = &t }

// Holder returns who holds the key's lock now (or held it last), and
// since when: the zero Stamp when the holder wrote none.
func (l *FileLock) Holder() Stamp { return readStampAt(l.f, holderAt) }

// waitKey takes f's lock, which is key's lock file at path, the way
// flockWait does, and takes it over when its holder is gone and the
// takeover bound has passed: it then returns errReopen, and the caller
// opens path again. Without wait it does not wait for a live holder.
func (fl *Files) waitKey(ctx context.Context, f *os.File, key, path string, wait bool) error {
	if fl.takeover == nil {
		return flockWait(ctx, f, lockExclusive, wait)
	}
	for {
		var err error
		if wait {
			wctx, cancel := context.WithTimeout(ctx, takeoverCheck)
			err = flockWait(wctx, f, lockExclusive, true)
			cancel()
			if err != nil && ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
		} else {
			err = flockWait(ctx, f, lockExclusive, false)
			if err != nil && !errors.Is(err, ErrBusy) {
				return err
			}
		}
		if err == nil {
			return nil
		}
		gone := readStampAt(f, holderAt)
		if !fl.abandoned(gone) {
			if !wait {
				return ErrBusy
			}
			continue
		}
		if err := fl.replace(ctx, f, key, path, gone); err != nil {
			return err
		}
		return errReopen
	}
}

// abandoned reports whether holder, a key's holder stamp, names a holder
// that is gone and took the lock longer ago than the takeover bound.
func (fl *Files) abandoned(holder Stamp) bool {
	return holderGone(holder) && time.Since(holder.At) >= fl.takeover.After()
}

// holderGone reports whether the process of the holder that stamped s
// has ended. A holder of this process is never gone, retired or not: a
// manager that shut down keeps serving, and holds its locks itself. A
// stamp that names no process is not either: it is waited for.
func holderGone(s Stamp) bool {
	pidStr, _, ok := strings.Cut(s.Owner, "-")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return !processAlive(pid)
}

// replace replaces the lock file at path, which f has open, with a new
// one, unless another waiter did so first or its holder changed: under
// the takeover file's lock, so that two waiters never both replace it.
func (fl *Files) replace(ctx context.Context, f *os.File, key, path string, gone Stamp) error {
	g, err := fl.open(filepath.Join(fl.dir, takeoverFile))
	if err != nil {
		return err
	}
	defer g.Close() // releases the takeover lock
	if err := flockWait(ctx, g, lockExclusive, true); err != nil {
		return err
	}
	same, err := fl.root.SameFile(f, path)
	switch {
	case err != nil:
		return unavailable(path, err)
	case !same:
		return nil // another waiter replaced it: open the new one
	case readStampAt(f, holderAt) != gone:
		return nil // taken and released meanwhile: try the file again
	}
	tmp := filepath.Join(fl.dir, ".new-"+key)
	nf, err := fl.openLockFile(tmp)
	if err != nil {
		return unavailable(tmp, err)
	}
	_ = nf.Close()
	if err := fl.root.Rename(tmp, path); err != nil {
		_ = fl.root.Remove(tmp)
		return unavailable(path, fmt.Errorf("replacing a lock file held by no live holder: %w", err))
	}
	if fl.takeover.Log != nil {
		fl.takeover.Log(key, gone)
	}
	return nil
}
