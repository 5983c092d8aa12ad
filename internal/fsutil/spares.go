package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
)

// SparePrefix starts the names of the files a [Spares] keeps; the names
// their owners use never start with a dot.
const SparePrefix = ".spare-"

// MaxSpares bounds the files one [Spares] keeps.
const MaxSpares = 32

// Spares keeps files that their owner retired instead of removing them,
// so that it can reuse them instead of creating files: on some file
// systems creating a file costs far more than renaming one (see
// BENCHMARKS.md, "Figures behind design choices"). pkg/cache keeps its
// retired order records here, and package locks its sandboxes' lock
// files. Every spare of a directory is named with SparePrefix, a random
// tag of its pool and a number; a spare that vanished (another pool
// adopted it) only costs its owner a fallback to creating a file.
//
// The pool's lock is held for its bookkeeping only: a file is renamed
// into the pool, and a spare out of it, without it, so that concurrent
// owners do not queue behind each other's renames. Only the first take,
// which adopts the spares of earlier processes, renames under it.
type Spares struct {
	root     Root       // where the spares are, reached as it says
	mu       sync.Mutex // guards the fields below
	prefix   string     // this pool's file names: SparePrefix + a random tag + "-"
	paths    []string   // spare files, ready to reuse
	retiring int        // records being renamed into the pool, each with a slot reserved
	next     uint64     // the number in the next spare's name
	adopted  bool       // spares left by earlier processes were adopted
}

// Owns reports whether name, a file name, is one of this pool's spares.
func (s *Spares) Owns(name string) bool { return strings.HasPrefix(name, s.prefix) }

// NewSpares returns an empty pool.
func NewSpares(r Root) *Spares {
	return &Spares{root: r, prefix: fmt.Sprintf("%s%016x-", SparePrefix, rand.Uint64())} //nolint:gosec // a tag, not a secret
}

// Take returns a spare file to reuse, or "" when there is none. The first
// call adopts the spare files in dir that other pools left behind (a
// previous run of the process), up to MaxSpares, and removes the rest.
func (s *Spares) Take(dir string) string {
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

// Retire moves the file at path into the pool, and reports whether it
// did; when the pool is full or the rename fails the caller removes the
// file. A file that does not exist gives fs.ErrNotExist. The rename
// runs outside the pool's lock, in a slot reserved under it, so the pool
// never holds more than MaxSpares.
func (s *Spares) Retire(path string) (bool, error) {
	if s == nil {
		return false, nil
	}
	s.mu.Lock()
	if len(s.paths)+s.retiring >= MaxSpares {
		s.mu.Unlock()
		return false, nil
	}
	s.retiring++
	spare := s.nameLocked(filepath.Dir(path))
	s.mu.Unlock()

	err := s.root.Rename(path, spare)
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

func (s *Spares) nameLocked(dir string) string {
	s.next++
	return filepath.Join(dir, fmt.Sprintf("%s%d", s.prefix, s.next))
}

// adoptLocked renames into this pool the spare files of other pools found
// in dir, up to MaxSpares, and removes the others. A rename that loses a
// race with another pool adopting the same file is skipped.
func (s *Spares) adoptLocked(dir string) {
	des, err := s.root.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasPrefix(name, SparePrefix) || strings.HasPrefix(name, s.prefix) {
			continue
		}
		old := filepath.Join(dir, name)
		if len(s.paths) >= MaxSpares {
			_ = s.root.Remove(old) // an extra spare is only a stray file
			continue
		}
		spare := s.nameLocked(dir)
		if s.root.Rename(old, spare) == nil {
			s.paths = append(s.paths, spare)
		}
	}
}

// Return gives back a spare that Take returned and the caller could not
// use (its name is still the spare's).
func (s *Spares) Return(spare string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paths)+s.retiring >= MaxSpares {
		_ = s.root.Remove(spare) // an extra spare is only a stray file
		return
	}
	s.paths = append(s.paths, spare)
}
