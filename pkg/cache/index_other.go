//go:build !linux

package cache

// dirWatch is not available off Linux: [Cache.IndexResults] returns
// ErrNoIndex and ForContainer lists the directory.
type dirWatch struct{}

const indexSupported = false

func newDirWatch() (*dirWatch, error)   { return nil, ErrNoIndex }
func (*dirWatch) add(string) bool       { return false }
func (*dirWatch) remove()               {}
func (*dirWatch) drain(*nameIndex) bool { return false }
func (*dirWatch) close() error          { return nil }
