package locks

import (
	"context"
	"sync"
)

// Keyed serializes the holders of one key while holders of different
// keys proceed in parallel. Waiting respects the context. The zero value
// is not usable: see [NewKeyed].
type Keyed struct {
	mu    sync.Mutex // guards locks
	locks map[string]*keyLock
}

type keyLock struct {
	refs int           // waiters and holder; guarded by Keyed.mu
	sem  chan struct{} // capacity 1: holding the token holds the lock
}

// NewKeyed returns a set of keyed locks with no key in use.
func NewKeyed() *Keyed {
	return &Keyed{locks: make(map[string]*keyLock)}
}

// Lock acquires the lock for key and returns its release function, which
// must be called exactly once. When ctx ends first, it returns ctx.Err()
// without the lock.
func (k *Keyed) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	l, ok := k.locks[key]
	if !ok {
		l = &keyLock{sem: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
		return func() {
			<-l.sem
			k.unref(key, l)
		}, nil
	case <-ctx.Done():
		k.unref(key, l)
		return nil, ctx.Err()
	}
}

func (k *Keyed) unref(key string, l *keyLock) {
	k.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(k.locks, key)
	}
	k.mu.Unlock()
}

// Refs returns how many callers hold or wait for the lock of key, for
// tests and debugging.
func (k *Keyed) Refs(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.locks[key]; l != nil {
		return l.refs
	}
	return 0
}
