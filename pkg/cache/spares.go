package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// spareFilePrefix starts the names of retired order records kept for
// reuse. Container IDs cannot start with '.', so no record is named so.
const spareFilePrefix = ".spare-"

// maxSpares bounds the retired record files one Cache keeps.
const maxSpares = 32

// spares keeps order-record files that [Cache.RemoveOrder] retired, so that
// [Cache.WriteOrder] can reuse them instead of creating a file. Every pod
// setup writes a record and its teardown removes it, and creating a file
// costs far more than renaming one on some file systems (see
// BENCHMARKS.md, "Figures behind design choices"). A spare is written
// under its own name and only then renamed into place, so a reader still
// sees the old record or the new one, never a spare's stale content.
//
// A spare that vanished (another Cache adopted it) only costs a fallback
// to creating a file.
//
// The pool's lock is held for its bookkeeping only: a record is renamed
// into the pool, and a spare out of it, without it, so that concurrent
// teardowns do not queue behind each other's renames. Only the first
// take, which adopts the spares of earlier processes, renames under it.
type spares struct {
	mu       sync.Mutex // guards the fields below
	prefix   string     // this pool's file names: spareFilePrefix + a random tag + "-"
	paths    []string   // spare files, ready to reuse
	retiring int        // records being renamed into the pool, each with a slot reserved
	next     uint64     // the number in the next spare's name
	adopted  bool       // spares left by earlier processes were adopted
}

func newSpares() *spares {
	return &spares{prefix: fmt.Sprintf("%s%016x-", spareFilePrefix, rand.Uint64())}
}

// take returns a spare file to reuse, or "" when there is none. The first
// call adopts the spare files in dir that other Caches left behind (a
// previous run of the runtime), up to maxSpares, and removes the rest.
func (s *spares) take(dir string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.adopted {
		s.adopted = true
		s.adoptLocked(dir)
	}
	if len(s.paths) == 0 {
		return ""
	}
	p := s.paths[len(s.paths)-1]
	s.paths = s.paths[:len(s.paths)-1]
	return p
}

// retire moves the record at path into the pool, and reports whether it
// did; when the pool is full or the rename fails the caller removes the
// record. A record that does not exist gives fs.ErrNotExist. The rename
// runs outside the pool's lock, in a slot reserved under it, so the pool
// never holds more than maxSpares.
func (s *spares) retire(path string) (bool, error) {
	if s == nil {
		return false, nil
	}
	s.mu.Lock()
	if len(s.paths)+s.retiring >= maxSpares {
		s.mu.Unlock()
		return false, nil
	}
	s.retiring++
	spare := s.nameLocked(filepath.Dir(path))
	s.mu.Unlock()

	err := os.Rename(path, spare)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retiring--
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, err
	case err != nil:
		return false, nil
	}
	s.paths = append(s.paths, spare)
	return true, nil
}

func (s *spares) nameLocked(dir string) string {
	s.next++
	return filepath.Join(dir, fmt.Sprintf("%s%d", s.prefix, s.next))
}

// adoptLocked renames into this pool the spare files of other pools found
// in dir, up to maxSpares, and removes the others. A rename that loses a
// race with another Cache adopting the same file is skipped.
func (s *spares) adoptLocked(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasPrefix(name, spareFilePrefix) || strings.HasPrefix(name, s.prefix) {
			continue
		}
		old := filepath.Join(dir, name)
		if len(s.paths) >= maxSpares {
			_ = os.Remove(old) // an extra spare is only a stray file
			continue
		}
		spare := s.nameLocked(dir)
		if os.Rename(old, spare) == nil {
			s.paths = append(s.paths, spare)
		}
	}
}

// IsSpareFile reports whether name, a file name in [Cache.OrdersDir], is
// a retired order record that a Cache keeps for reuse: not a record, and
// not left behind by any pod (a Cache keeps at most 32).
func IsSpareFile(name string) bool { return strings.HasPrefix(name, spareFilePrefix) }
