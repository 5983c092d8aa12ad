package fakecni

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// GateTimeout bounds [Gate.WaitEntered], unless [WithGateTimeout] says
// otherwise: how long the code under test may take to reach a gated call
// on a loaded machine.
var GateTimeout = 30 * time.Second

// Match selects calls by verb, network and plugin type. An empty field
// matches every value; the zero Match matches every call. VERSION calls
// carry no network: select them by PluginType.
type Match struct {
	Verb       string // CNI_COMMAND
	Network    string // the config's "name"
	PluginType string // the plugin binary's file name
}

func (m Match) matches(c Call) bool {
	return (m.Verb == "" || m.Verb == c.Verb) &&
		(m.Network == "" || m.Network == c.Network) &&
		(m.PluginType == "" || m.PluginType == c.PluginType)
}

// Count returns how many recorded calls m matches, VERSION calls included
// when m selects them (the zero Match counts every call).
// [Exec.ResetCalls] starts the count again.
func (f *Exec) Count(m Match) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if m.matches(c) {
			n++
		}
	}
	return n
}

// Gate holds the calls that its [Match] selects, after recording them and
// before answering them, until [Gate.Release]: a test waits with
// [Gate.WaitEntered] until the code under test is inside the call, acts
// while it is held, and lets it go. Make one with [Exec.Gate].
type Gate struct {
	match     Match
	timeout   time.Duration // of WaitEntered
	ignoreCtx bool
	released  chan struct{}
	once      sync.Once

	mu      sync.Mutex    // guards entered and changed
	entered int           // calls that reached the gate, released or not
	changed chan struct{} // closed and replaced on every entry
}

// GateOption configures a [Gate].
type GateOption func(*Gate)

// IgnoreContext makes a gate hold its calls even after their context
// ends, as a plugin that ignores cancellation would. By default a held
// call fails with its context's error when the context ends, as a plugin
// killed by the default executor would.
func IgnoreContext() GateOption { return func(g *Gate) { g.ignoreCtx = true } }

// Gate holds every call that m selects, from now until the returned
// gate's Release; a call that several gates select waits for each of
// them in turn. Scripts still decide the answer once a call is let go.
//
// A test that holds a call the manager is waiting for releases the gate
// before the manager's Shutdown: register g.Release with t.Cleanup after
// the manager is made, so that it runs first.
func (f *Exec) Gate(m Match, opts ...GateOption) *Gate {
	g := &Gate{match: m, released: make(chan struct{}), changed: make(chan struct{}), timeout: f.gateTimeout}
	for _, o := range opts {
		o(g)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gates = append(f.gates, g)
	return g
}

// Release lets the held calls and every later one through. Releasing
// twice is fine.
func (g *Gate) Release() {
	g.once.Do(func() { close(g.released) })
}

// Entered returns how many calls have reached the gate so far, released
// or not.
func (g *Gate) Entered() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entered
}

// WaitEntered waits until n calls have reached the gate, and fails the
// test after [GateTimeout] (or the Exec's [WithGateTimeout]).
func (g *Gate) WaitEntered(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.NewTimer(g.timeout)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		got, changed := g.entered, g.changed
		g.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			tb.Fatalf("fakecni: %d of %d calls reached the gate %+v within %v", got, n, g.match, g.timeout)
			return
		}
	}
}

// hold counts c in and waits until the gate is released or, unless the
// gate ignores it, until ctx ends.
func (g *Gate) hold(ctx context.Context, c Call) error {
	g.mu.Lock()
	g.entered++
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	if g.ignoreCtx {
		<-g.released
		return nil
	}
	select {
	case <-g.released:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fakecni: %s held at a gate until its context ended: %w", c, ctx.Err())
	}
}

// gatesFor returns the gates that select c; f.mu is held.
func (f *Exec) gatesFor(c Call) []*Gate {
	var out []*Gate
	for _, g := range f.gates {
		if g.match.matches(c) {
			out = append(out, g)
		}
	}
	return out
}
