package cni

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The face's engine reads a conf dir that the face writes (see the
// package doc). Each face keeps it in a directory of its own under
// <os.TempDir()>/ocicni-gocni-<euid>, holding a lock file that stays
// locked while the face lives. A runtime that never calls Shutdown (go-cni
// has none, so containerd does not) would otherwise leave one directory
// per start: New removes those whose lock no live process holds.
const (
	stateDirPrefix = "ocicni-gocni-"
	faceDirPrefix  = "face-"
	newDirPrefix   = ".new-" // a face's directory until its lock is taken
	faceLockName   = "lock"
	faceConfDir    = "net.d"
	// staleNewAge is how old a directory of a face that never got its lock
	// (its process died right after making it) must be for the sweep to
	// remove it: another process may be making one right now.
	staleNewAge = time.Minute
)

// faceState is a face's own directory and the lock that marks it alive.
type faceState struct {
	dir     string
	confDir string
	unlock  func() // releases the lock; nil when there is none
}

// newFaceState makes the face's directory, locks it, and sweeps the
// directories of faces that are gone. When the shared base directory
// cannot be trusted (not a directory of ours, open to others), it falls
// back to a fresh temporary directory, which only Shutdown removes.
func newFaceState() (*faceState, error) {
	base := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", stateDirPrefix, os.Geteuid()))
	if err := trustedDir(base); err != nil {
		dir, err := os.MkdirTemp("", "gocni-")
		if err != nil {
			return nil, fmt.Errorf("gocni: engine conf dir: %w", err)
		}
		return &faceState{dir: dir, confDir: filepath.Join(dir, faceConfDir)}, nil
	}
	sweepFaces(base)
	// The directory gets its face- name only once its lock is held, so a
	// sweep never mistakes a face being made for a gone one.
	tmp, err := os.MkdirTemp(base, newDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("gocni: engine conf dir: %w", err)
	}
	unlock, err := lockFile(filepath.Join(tmp, faceLockName), true)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("gocni: locking engine conf dir: %w", err)
	}
	dir := filepath.Join(base, faceDirPrefix+strings.TrimPrefix(filepath.Base(tmp), newDirPrefix))
	if err := os.Rename(tmp, dir); err != nil {
		unlock()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("gocni: engine conf dir: %w", err)
	}
	return &faceState{dir: dir, confDir: filepath.Join(dir, faceConfDir), unlock: unlock}, nil
}

// remove releases the lock and removes the face's directory.
func (s *faceState) remove() error {
	if s.unlock != nil {
		s.unlock()
	}
	return os.RemoveAll(s.dir)
}

// trustedDir makes dir if needed and checks that it is a directory, not a
// symlink, owned by this process's user and closed to others, so that
// nobody else can plant configs for the engine to run.
func trustedDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s is open to other users (%v)", dir, fi.Mode().Perm())
	}
	return ownedByUs(fi)
}

// sweepFaces removes the directories of faces whose lock is free (their
// process is gone), and those of faces that never got their lock, once
// older than staleNewAge. Failures only leave a directory for the next
// sweep.
func sweepFaces(base string) {
	des, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, de := range des {
		dir := filepath.Join(base, de.Name())
		switch {
		case !de.IsDir():
		case strings.HasPrefix(de.Name(), faceDirPrefix):
			unlock, err := lockFile(filepath.Join(dir, faceLockName), false)
			if err != nil {
				continue // alive, or not ours to judge
			}
			_ = os.RemoveAll(dir)
			unlock()
		case strings.HasPrefix(de.Name(), newDirPrefix):
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > staleNewAge {
				_ = os.RemoveAll(dir)
			}
		}
	}
}
