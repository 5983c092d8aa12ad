//go:build !unix

package fsutil

import "os"

// holdTemp: platforms without flock take no lock.
func (Root) holdTemp(*os.File) (bool, error) { return true, nil }

// RemoveUnheld: without flock, a write in flight cannot be told from a
// crash's leftover, so nothing is removed.
func (Root) RemoveUnheld(string) (bool, error) { return false, nil }
