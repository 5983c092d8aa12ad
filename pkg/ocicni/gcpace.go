package ocicni

import (
	"context"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
)

// gcPace is how GC's DELs of stale sandboxes give way to pod setups (see
// gcPacer).
type gcPace struct {
	// window: the node counts as setting pods up while a setup is in
	// flight, and for window after the last one began.
	window time.Duration
	// rest: while it does, a worker rests rest times as long as its
	// sandbox's DELs took, after them. 0 turns pacing off.
	rest int
}

// defaultGCPace keeps GC's DELs to a seventh of one CPU while pods are
// set up. Plugin runs are CPU-bound process starts, and on a small node
// any CPU they use slows the setups beside them, whatever their priority;
// only not running does not. On a node whose CPUs are never idle, a rest
// of 6 kept setups during GC within 1.1x at p50 and 1.2x at p99, where a
// rest of 3 did not (see BENCHMARKS.md, "GC" and "Figures behind design
// choices").
var defaultGCPace = gcPace{window: 250 * time.Millisecond, rest: 6}

// gcSandboxHook is nil outside tests. A _test.go file sets it, before any
// manager runs, so that a test can hold GC's DEL workers between
// sandboxes (see gchold_test.go). gcPacer.run calls it with GC's ctx
// before a sandbox (before its turn, so that time spent in it never
// counts as DEL time and lengthens a rest), and calls the function it
// returns after the sandbox's DELs and rest.
var gcSandboxHook func(ctx context.Context) (done func())

// gcPacer paces the DELs of one GC. While the node sets pods up (see
// setupTracker.busy), the workers delete one stale sandbox at a time, at
// the normal CPU priority (see paced), and each rests after its
// sandbox's DELs, for rest times as long as they took, before the next
// worker's turn: GC then leaves the CPU to the setups most of the time,
// and still deletes one sandbox per (rest+1)·d, d being its DELs' time
// beside the setups (0.3 s, so 0.47 sandboxes a second, on two busy
// CPUs). At other times the workers run at full speed, in parallel, at
// the lowest priority.
//
// Rests are not cut to fit the sandboxes left before the deadline: what
// GC does not reach by its reserve for the GC verbs goes to the next GC
// (see verbsReserved). A rest ends at the deadline, and the last sandbox
// gets none.
//
// Lock order: a worker takes its turn before any lock of the sandbox it
// deletes, and rests after it released them, so a resting worker holds
// nothing that a pod operation waits for.
type gcPacer struct {
	pace     gcPace
	setups   *setupTracker
	turn     chan struct{} // holds one token while a worker's paced turn lasts
	deadline time.Time     // ctx's; zero without one
}

func newGCPacer(ctx context.Context, pace gcPace, setups *setupTracker) *gcPacer {
	p := &gcPacer{pace: pace, setups: setups, turn: make(chan struct{}, 1)}
	if dl, ok := ctx.Deadline(); ok {
		p.deadline = dl
	}
	return p
}

// run runs del, the DELs of one stale sandbox, with left sandboxes (this
// one included) not yet started: at once when the node sets no pods up,
// else in its turn, under a context marked paced, and followed by a rest.
// It reports false, del not run, when ctx ends while del waits for its
// turn.
func (p *gcPacer) run(ctx context.Context, left int, del func(context.Context)) bool {
	if gcSandboxHook != nil {
		defer gcSandboxHook(ctx)()
	}
	if p.pace.rest <= 0 || !p.setups.busy(p.pace.window) {
		del(ctx)
		return true
	}
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-p.turn }()
	start := time.Now()
	del(context.WithValue(ctx, pacedKey{}, true))
	now := time.Now()
	if p.setups.busy(p.pace.window) {
		bgwork.Sleep(ctx, p.restAfter(now.Sub(start), left, now))
	}
	return true
}

// restAfter returns how long to rest at now after DELs that took took,
// with left sandboxes (the one just deleted included) not started before
// them: rest times took, none after the last sandbox, and never past the
// deadline.
func (p *gcPacer) restAfter(took time.Duration, left int, now time.Time) time.Duration {
	if left <= 1 {
		return 0
	}
	rest := time.Duration(p.pace.rest) * took
	if !p.deadline.IsZero() {
		rest = min(rest, max(0, p.deadline.Sub(now)))
	}
	return rest
}

type pacedKey struct{}

// paced reports whether ctx is that of a paced turn (see gcPacer.run).
// Its DELs keep the normal CPU priority: the rests already leave the CPU
// to the setups, and at the lowest priority a DEL beside setups that keep
// the CPUs busy waits for an idle moment that seldom comes, holding what
// it took meanwhile (the kernel's network locks, host-local's store),
// which the setups then wait for.
func paced(ctx context.Context) bool {
	p, _ := ctx.Value(pacedKey{}).(bool)
	return p
}
