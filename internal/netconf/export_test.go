package netconf

import "context"

// Hooks for the external tests (package netconf_test). Those are external
// because they play plugins with ocicnitest.FakeExec, and ocicnitest
// imports package ocicni, which imports this package.

// SkipKind is skipKind.
var SkipKind = skipKind

// Acquire takes the loader's lock, as a load does, and returns its
// release.
func (l *Loader) Acquire(ctx context.Context) (release func(), err error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	return l.release, nil
}
