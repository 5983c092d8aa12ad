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

// defaultGCPace keeps GC's DELs to about a quarter of one CPU while pods
// are set up. Plugin runs are CPU-bound process starts, and on a small
// node any CPU they use slows the setups beside them, whatever their
// priority; only not running does not. A rest of 3 keeps setups during
// GC within their targets, and a longer one only made GC longer (see
// BENCHMARKS.md, "Figures behind design choices").
var defaultGCPace = gcPace{window: 250 * time.Millisecond, rest: 3}

// gcSandboxHook is nil outside tests. A _test.go file sets it, before any
// manager runs, so that a test can hold GC's DEL workers between
// sandboxes (see gchold_test.go). gcPacer.run calls it with GC's ctx
// before a sandbox (before its turn, so that time spent in it never
// counts as DEL time and lengthens a rest), and calls the function it
// returns after the sandbox's DELs and rest.
var gcSandboxHook func(ctx context.Context) (done func())

// gcPacer paces the DELs of one GC. While the node sets pods up (see
// setupTracker.busy), the workers delete one stale sandbox at a time, and
// each rests after its sandbox's DELs, for rest times as long as they
// took, before the next worker's turn: GC then leaves the CPU to the
// setups most of the time, and takes longer. At other times the workers
// run at full speed, in parallel.
//
// The rest never costs GC its deadline: when ctx has one, a rest is cut
// so that the sandboxes left, deleted back to back at the pace of the
// last one, still end before it. The last sandbox gets no rest.
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
// else in its turn and followed by a rest. It reports false, del not run,
// when ctx ends while del waits for its turn.
func (p *gcPacer) run(ctx context.Context, left int, del func()) bool {
	if gcSandboxHook != nil {
		defer gcSandboxHook(ctx)()
	}
	if p.pace.rest <= 0 || !p.setups.busy(p.pace.window) {
		del()
		return true
	}
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-p.turn }()
	start := time.Now()
	del()
	now := time.Now()
	if p.setups.busy(p.pace.window) {
		bgwork.Sleep(ctx, p.restAfter(now.Sub(start), left, now))
	}
	return true
}

// restAfter returns how long to rest at now after DELs that took took,
// with left sandboxes (the one just deleted included) not started before
// them.
func (p *gcPacer) restAfter(took time.Duration, left int, now time.Time) time.Duration {
	after := left - 1
	if after <= 0 {
		return 0
	}
	rest := time.Duration(p.pace.rest) * took
	if !p.deadline.IsZero() {
		slack := p.deadline.Sub(now) - time.Duration(after)*took
		rest = min(rest, max(0, slack/time.Duration(after)))
	}
	return rest
}
