//go:build !unix

package cni

import (
	"errors"
	"io/fs"
)

// errNoLocks: without file locks, a face cannot tell a live face's
// directory from a stale one, so it uses a fresh temporary directory.
var errNoLocks = errors.New("gocni: no file locks on this platform")

func lockFile(string, bool) (func(), error) { return nil, errNoLocks }

func ownedByUs(fs.FileInfo) error { return errNoLocks }
