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

// gate is a context-aware reader/writer lock. Pod operations hold it
// shared; GC holds it exclusively. A waiting writer blocks new readers so
// that GC cannot starve.
type gate struct {
	mu      sync.Mutex // guards the fields below
	readers int
	writer  bool
	waiting int           // writers waiting
	changed chan struct{} // closed and replaced on every release
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gate) rlock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer || g.waiting > 0 {
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
	g.broadcast()
	g.mu.Unlock()
}

func (g *gate) lock(ctx context.Context) error {
	g.mu.Lock()
	g.waiting++
	for g.writer || g.readers > 0 {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting--
			g.broadcast()
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.waiting--
	g.writer = true
	g.mu.Unlock()
	return nil
}

func (g *gate) unlock() {
	g.mu.Lock()
	g.writer = false
	g.broadcast()
	g.mu.Unlock()
}

// inflight counts background work (rollbacks) that Shutdown waits for.
// Unlike a sync.WaitGroup, work may start while another goroutine waits,
// since the manager keeps serving after Shutdown.
type inflight struct {
	mu   sync.Mutex // guards n
	n    int
	idle *sync.Cond // signalled when n drops to zero
}

func newInflight() *inflight {
	f := &inflight{}
	f.idle = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		f.idle.Broadcast()
	}
	f.mu.Unlock()
}

// wait returns once no work is in flight.
func (f *inflight) wait() {
	f.mu.Lock()
	for f.n > 0 {
		f.idle.Wait()
	}
	f.mu.Unlock()
}
