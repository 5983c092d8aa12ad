package ledger

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Ledger is the store of one cache dir (see the package doc). Its
// methods are safe for concurrent use.
type Ledger struct {
	c     *cache.Cache
	locks *locks.Files
}

// New returns the ledger of the cache dir dir ("" for libcni's default,
// /var/lib/cni). Nothing is read or made until it is used.
func New(dir string) *Ledger {
	c := cache.New(dir)
	return &Ledger{c: c, locks: locks.NewFiles(filepath.Join(c.Dir(), "ocicni", "locks"), fsutil.NewRoot(c.Dir()))}
}

// Dir returns the cache dir, which libcni reads and writes too.
func (l *Ledger) Dir() string { return l.c.Dir() }

// EntryPath returns the path of the cache entry that libcni keeps for
// (network, id, ifname); an error when the names make no valid file name.
func (l *Ledger) EntryPath(network, id, ifname string) (string, error) {
	name, err := cache.FileName(network, id, ifname)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.c.ResultsDir(), name), nil
}

// Open starts keeping the index of the results directory's names (see
// [cache.Cache.IndexResults]); without it every read lists the
// directory, which is correct, only slower.
func (l *Ledger) Open() error { return l.c.IndexResults() }

// Close stops the index and retires this ledger's lock owner (see
// [locks.Files.Retire]). The ledger keeps working, unindexed.
func (l *Ledger) Close() {
	l.locks.Retire()
	_ = l.c.Close() // it only stops the index
}

// SandboxLock is one sandbox's lock file, held.
type SandboxLock struct {
	l    *Ledger
	id   string
	file *locks.FileLock
}

// LockSandbox takes sandbox id's lock file, which holds across engines
// and processes, waiting while another holder has it; with try it
// returns an error matching [locks.ErrBusy] at once instead.
func (l *Ledger) LockSandbox(ctx context.Context, id string, try bool) (*SandboxLock, error) {
	var f *locks.FileLock
	var err error
	if try {
		f, err = l.locks.TryLock(id)
	} else {
		f, err = l.locks.Lock(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	_ = l.recoverCommit(id) // on failure, the next Commit tries again and fails
	return &SandboxLock{l: l, id: id, file: f}, nil
}

// Inheritable returns the lock file, for a plugin to inherit (see
// [locks.FileLock.Inheritable]).
func (s *SandboxLock) Inheritable() *os.File { return s.file.Inheritable() }

// LastRelease returns who released the sandbox's lock before this holder,
// and when; the zero Stamp when nobody did.
func (s *SandboxLock) LastRelease() locks.Stamp { return s.file.Stamp() }

// Release stamps the lock file with this ledger's owner, or removes it
// when the sandbox has no record left (it then guards nothing), and
// releases it.
func (s *SandboxLock) Release() {
	has, err := s.l.c.HasOrder(s.id)
	s.file.Unlock(err == nil && !has)
}

// SetTakeover makes a wait for a sandbox's lock file take it over when
// its holder is gone (see [locks.Files.SetTakeover]). Call it before any
// lock is taken.
func (l *Ledger) SetTakeover(t locks.Takeover) { l.locks.SetTakeover(t) }

// RLockNode takes the node gate shared (see [locks.Files.RLockNode]).
func (l *Ledger) RLockNode(ctx context.Context) (*locks.FileLock, error) {
	return l.locks.RLockNode(ctx)
}

// LockNode tries to take the node gate exclusively within hold (see
// [locks.Files.LockNode]).
func (l *Ledger) LockNode(ctx context.Context, hold time.Duration) (*locks.FileLock, error) {
	return l.locks.LockNode(ctx, hold)
}

// RecentWork returns the sandboxes whose lock file was held or released
// at since or later, with the stamp of each (see [locks.Files.Recent]).
func (l *Ledger) RecentWork(since time.Time) (map[string]locks.Stamp, error) {
	return l.locks.Recent(since)
}

// Owner is the owner that this ledger stamps its releases with.
func (l *Ledger) Owner() string { return l.locks.Owner() }

// SweepLocks removes the lock files of sandboxes that have no record,
// other than recorded (the sandboxes a scan found records of), and that
// nobody holds: what a holder that died before it wrote a record left.
// It returns the listing's failure; a file it cannot take is left for
// the next sweep.
func (l *Ledger) SweepLocks(recorded []string) error {
	keys, err := l.locks.Keys()
	if err != nil {
		return err
	}
	skip := make(map[string]bool, len(recorded))
	for _, id := range recorded {
		skip[id] = true
	}
	for _, id := range keys {
		if skip[id] {
			continue
		}
		if held, err := l.LockSandbox(context.Background(), id, true); err == nil {
			held.Release() // removes the file when the sandbox still has no record
		}
	}
	return nil
}
