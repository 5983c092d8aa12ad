package ocicni

import (
	"context"
	"sync"
)

// podLocks serializes operations on one sandbox while letting different
// sandboxes proceed in parallel. Waiting respects the context.
type podLocks struct {
	mu    sync.Mutex // guards locks
	locks map[string]*podLock
}

type podLock struct {
	refs int           // waiters and holder; guarded by podLocks.mu
	sem  chan struct{} // capacity 1: holding the token holds the lock
}

func newPodLocks() *podLocks {
	return &podLocks{locks: make(map[string]*podLock)}
}

// lock acquires the lock for id and returns its release function.
func (p *podLocks) lock(ctx context.Context, id string) (func(), error) {
	p.mu.Lock()
	l, ok := p.locks[id]
	if !ok {
		l = &podLock{sem: make(chan struct{}, 1)}
		p.locks[id] = l
	}
	l.refs++
	p.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
		return func() {
			<-l.sem
			p.unref(id, l)
		}, nil
	case <-ctx.Done():
		p.unref(id, l)
		return nil, ctx.Err()
	}
}

func (p *podLocks) unref(id string, l *podLock) {
	p.mu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(p.locks, id)
	}
	p.mu.Unlock()
}

// gate is a context-aware reader/writer lock. Pod operations, and GC's
// DELs of stale sandboxes, hold it shared; GC holds it exclusively only
// while it sends the GC verbs, so that no ADD runs while a plugin
// collects.
//
// The gate prefers readers. A waiting writer sets nothing that readers
// wait for: it takes the gate at a moment when no reader holds it, and
// gives up when its context ends first. A reader therefore waits only
// for a writer that already holds the gate, never for the readers in
// flight on other sandboxes. The price is that a writer can starve on a
// node that is never without a pod operation in flight; GC then skips
// its verbs (see [ErrGCVerbsSkipped]).
type gate struct {
	mu      sync.Mutex // guards the fields below
	readers int
	writer  bool
	waiting int           // writers waiting; readers ignore it (tests and debugging read it)
	changed chan struct{} // closed and replaced when the last reader or the writer leaves
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// rlock takes the gate shared. It waits only while a writer holds it.
func (g *gate) rlock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.readers++
	g.mu.Unlock()
	return nil
}

func (g *gate) runlock() {
	g.mu.Lock()
	g.readers--
	if g.readers == 0 {
		g.broadcast() // the only release a waiting writer wants
	}
	g.mu.Unlock()
}

// lock takes the gate exclusively once neither a reader nor a writer
// holds it, without holding back new readers meanwhile. It returns
// ctx.Err(), without the gate, when ctx ends first (or has ended).
func (g *gate) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	g.waiting++
	defer func() {
		g.waiting--
		g.mu.Unlock()
	}()
	for g.writer || g.readers > 0 {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.writer = true
	return nil
}

func (g *gate) unlock() {
	g.mu.Lock()
	g.writer = false
	g.broadcast()
	g.mu.Unlock()
}
