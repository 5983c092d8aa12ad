package locks

import (
	"context"
	"sync"
	"time"
)

// Gate is a context-aware reader/writer lock that prefers readers within
// the bounds of its [Patience] (see the package doc). The zero value is
// not usable: see [NewGate].
type Gate struct {
	patience Patience
	mu       sync.Mutex // guards the fields below
	readers  int
	writer   bool
	holding  int           // waiting writers that hold back new readers
	waiting  int           // writers waiting; readers ignore it (State reports it)
	changed  chan struct{} // closed and replaced when the last reader or the writer leaves, or a hold ends
}

// Patience is how long a writer waits for an idle moment before it holds
// back new readers (Idle), and how long it holds them back at most at a
// time (Hold).
type Patience struct{ Idle, Hold time.Duration }

// NewGate returns an open gate whose writers wait with patience p.
func NewGate(p Patience) *Gate { return &Gate{patience: p, changed: make(chan struct{})} }

func (g *Gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// RLock takes the gate shared. It waits while a writer holds the gate, or
// holds back new readers, and returns ctx.Err(), without the gate, when
// ctx ends first.
func (g *Gate) RLock(ctx context.Context) error {
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

// RUnlock releases a shared hold taken by RLock.
func (g *Gate) RUnlock() {
	g.mu.Lock()
	g.readers--
	if g.readers == 0 {
		g.broadcast() // the only release a waiting writer wants
	}
	g.mu.Unlock()
}

// Lock takes the gate exclusively once neither a reader nor a writer
// holds it, holding back new readers only within the gate's patience. It
// returns ctx.Err(), without the gate, when ctx ends first (or has
// ended).
func (g *Gate) Lock(ctx context.Context) error {
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
	phase := time.NewTimer(g.patience.Idle)
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
				phase.Reset(g.patience.Idle)
			} else {
				phase.Reset(g.patience.Hold)
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

// Unlock releases the gate taken by Lock.
func (g *Gate) Unlock() {
	g.mu.Lock()
	g.writer = false
	g.broadcast()
	g.mu.Unlock()
}

// GateState is who holds and waits for a [Gate] at one moment.
type GateState struct {
	Readers int  // readers holding the gate
	Writer  bool // whether a writer holds the gate
	Waiting int  // writers waiting for the gate
	Holding int  // waiting writers that hold back new readers
}

// State returns who holds and waits for g, read at one moment, for tests
// and debugging.
func (g *Gate) State() GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GateState{Readers: g.readers, Writer: g.writer, Waiting: g.waiting, Holding: g.holding}
}
