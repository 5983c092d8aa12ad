package ocicni

import (
	"context"
	"sync"
	"time"
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
// The gate prefers readers, within bounds. A waiting writer first sets
// nothing that readers wait for: it takes the gate at a moment when no
// reader holds it. A node whose pod operations overlap without a pause
// has no such moment, so after [gatePatience.idle] of waiting the writer
// holds back new readers, for at most [gatePatience.hold], while the ones
// in flight finish (a pod operation takes tens of milliseconds); if they
// have not, it lets the held-back readers in and waits for an idle moment
// again. A reader therefore waits at most hold for a waiting writer, never
// for the readers in flight on other sandboxes (a hung plugin holds back
// nobody for longer), and the writer gets in on a busy node. It gives up
// when its context ends first; GC then skips its verbs (see
// [ErrGCVerbsSkipped]).
type gate struct {
	patience gatePatience
	mu       sync.Mutex // guards the fields below
	readers  int
	writer   bool
	holding  int           // waiting writers that hold back new readers
	waiting  int           // writers waiting; readers ignore it (tests and debugging read it)
	changed  chan struct{} // closed and replaced when the last reader or the writer leaves, or a hold ends
}

// gatePatience is how long a writer waits for an idle moment before it
// holds back new readers (idle), and how long it holds them back at most
// at a time (hold).
type gatePatience struct{ idle, hold time.Duration }

// defaultGatePatience lets pods in for a second before GC holds them
// back, for at most a fifth of a second at a time.
var defaultGatePatience = gatePatience{idle: time.Second, hold: 200 * time.Millisecond}

func newGate(p gatePatience) *gate { return &gate{patience: p, changed: make(chan struct{})} }

func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// rlock takes the gate shared. It waits while a writer holds the gate,
// or holds back new readers.
func (g *gate) rlock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer || g.holding > 0 {
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
// holds it, holding back new readers only within the gate's patience (see
// gate). It returns ctx.Err(), without the gate, when ctx ends first (or
// has ended).
func (g *gate) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	g.waiting++
	holding := false
	setHold := func(on bool) { // with g.mu held
		if holding == on {
			return
		}
		holding = on
		if on {
			g.holding++
			return
		}
		g.holding--
		g.broadcast() // held-back readers go in
	}
	defer func() {
		setHold(false)
		g.waiting--
		g.mu.Unlock()
	}()
	phase := time.NewTimer(g.patience.idle)
	defer phase.Stop()
	for g.writer || g.readers > 0 {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
			g.mu.Lock()
		case <-phase.C:
			g.mu.Lock()
			if holding {
				phase.Reset(g.patience.idle)
			} else {
				phase.Reset(g.patience.hold)
			}
			setHold(!holding)
		case <-ctx.Done():
			g.mu.Lock()
			return ctx.Err()
		}
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
