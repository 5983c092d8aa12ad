package ocicni

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// In tests, gcSandboxHook looks for a hold in GC's ctx, where withGCHold
// puts it, so that a hold reaches only the GC it is given to, whatever
// else runs in parallel.
func init() { gcSandboxHook = heldSandbox }

type gcHoldKey struct{}

// withGCHold returns ctx with h, which then holds the DEL workers of a GC
// called with ctx between sandboxes.
func withGCHold(ctx context.Context, h *benchGCHold) context.Context {
	return context.WithValue(ctx, gcHoldKey{}, h)
}

// heldSandbox is gcSandboxHook in tests: with a hold in ctx, it waits
// while the hold is on, and counts the worker active until the sandbox is
// done.
func heldSandbox(ctx context.Context) (done func()) {
	h, _ := ctx.Value(gcHoldKey{}).(*benchGCHold)
	if h == nil {
		return func() {}
	}
	h.enter()
	return h.leave
}

// benchGCHold is the hold of BenchmarkGC10000: hold stops GC's DEL
// workers before their next sandbox and returns once none is deleting or
// resting; release lets them go on. A held worker waits whatever its ctx
// says: the benchmark's GC runs without a deadline.
type benchGCHold struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when held or active changes
	held    bool
	active  int // workers between enter and leave
	waiting int // workers held in enter
}

func newBenchGCHold() *benchGCHold {
	h := &benchGCHold{}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *benchGCHold) enter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held {
		h.waiting++
		h.cond.Wait()
		h.waiting--
	}
	h.active++
}

func (h *benchGCHold) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	h.cond.Broadcast()
}

// hold stops workers from starting a sandbox and waits until those that
// started one have finished it, its rest included.
func (h *benchGCHold) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = true
	for h.active > 0 {
		h.cond.Wait()
	}
}

func (h *benchGCHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	h.cond.Broadcast()
}

// heldWorkers is how many workers wait in enter.
func (h *benchGCHold) heldWorkers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting
}

// A held GC runs no DEL until it is released, and then deletes every
// stale sandbox: BenchmarkGC10000's baseline relies on it.
func TestGCHoldStopsDELs(t *testing.T) {
	t.Parallel()
	const stale = 3
	e := newITEnv(t)
	e.addConf("stale", e.gcConflist("stale", nil, nil))
	var (
		mu   sync.Mutex
		dels int
	)
	hook := func(_ context.Context, r PluginRun) {
		if r.Verb == "DEL" {
			mu.Lock()
			dels++
			mu.Unlock()
		}
	}
	h := newBenchGCHold()
	m := e.start(WithGCWorkers(2), WithPluginHook(hook))
	ctx := e.ctx()
	pods := make([]PodNetwork, stale)
	for i := range pods {
		pods[i] = e.pod(fmt.Sprint("stale", i))
		pods[i].Networks = []NetAttachment{{Name: "stale"}}
		e.setUp(pods[i])
	}

	h.hold()
	gc := gcAsync(withGCHold(ctx, h), m, []*PodNetwork{})
	require.Eventually(t, func() bool { return h.heldWorkers() == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"both GC workers wait at the hold")
	mu.Lock()
	assert.Zero(t, dels, "no DEL runs while GC is held")
	mu.Unlock()
	h.release()
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))
	for _, p := range pods {
		e.assertDetached(p)
	}
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "stale"), "the stale sandboxes' addresses are released")
}
