//go:build !nogctests

package ocicni

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

func TestGCPacerRestAfter(t *testing.T) {
	t.Parallel()
	now := time.Now()
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		deadline time.Time
		left     int
		want     time.Duration
	}{
		{name: "no deadline: rest times took", left: 5, want: 30 * ms},
		{name: "the last sandbox gets no rest", left: 1, want: 0},
		{name: "a far deadline leaves the rest", deadline: now.Add(time.Second), left: 5, want: 30 * ms},
		// The 4 sandboxes after this one do not fit before the deadline
		// even back to back; the rest is kept all the same, and GC's
		// reserve for its verbs leaves them to the next GC.
		{name: "sandboxes that cannot fit keep the rest", deadline: now.Add(35 * ms), left: 5, want: 30 * ms},
		{name: "a rest ends at the deadline", deadline: now.Add(20 * ms), left: 5, want: 20 * ms},
		{name: "deadline passed", deadline: now.Add(-time.Second), left: 5, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &gcPacer{pace: gcPace{rest: 3}, deadline: tc.deadline}
			assert.Equal(t, tc.want, p.restAfter(10*ms, tc.left, now))
		})
	}
}

func TestSetupTrackerBusy(t *testing.T) {
	t.Parallel()
	tr := newSetupTracker()
	assert.False(t, tr.busy(time.Hour), "no setup ever began")
	end := tr.begin("a", nil, func() {})
	assert.True(t, tr.busy(0), "a setup is in flight")
	end()
	assert.False(t, tr.busy(0), "none in flight, no window")
	assert.True(t, tr.busy(time.Hour), "one began within the window")
}

// While a pod's setup is in flight, GC's workers delete one stale sandbox
// at a time, and rest after each for the pace's multiple of what its DELs
// took, though two workers are free. The stale sandboxes are deleted all
// the same, with real bridge and host-local plugins.
func TestGCGivesWayToSetupInFlight(t *testing.T) {
	t.Parallel()
	const rest, stale = 2, 3
	e := newITEnv(t)
	addHeld := testenv.NewBarrier(t)
	e.addConf("stale", e.gcConflist("stale", nil, nil))
	e.addConf("held", e.poolConflistWith("held", map[string]any{"add": addHeld.Behaviour(nil)}))
	var (
		mu   sync.Mutex
		runs []delRun // the stale sandboxes' bridge DELs
	)
	hook := func(_ context.Context, r PluginRun) {
		if r.Verb == "DEL" && r.Plugin == "bridge" {
			end := time.Now()
			mu.Lock()
			runs = append(runs, delRun{id: r.ContainerID, start: end.Add(-r.Duration), end: end})
			mu.Unlock()
		}
	}
	m := e.start(WithGCWorkers(2), WithPluginHook(hook), withGCPace(gcPace{rest: rest}))
	ctx := e.ctx()
	pods := make([]PodNetwork, stale)
	for i := range pods {
		pods[i] = e.pod(fmt.Sprint("stale", i))
		pods[i].Networks = []NetAttachment{{Name: "stale"}}
		e.setUp(pods[i])
	}
	held := e.pod("held")
	held.Networks = []NetAttachment{{Name: "held"}}
	setup := setUpAsync(ctx, m, held)
	addHeld.WaitEntered(t, 1)

	gc := gcAsync(ctx, m, []*PodNetwork{})
	// GC's DELs are done once it waits for the gate, which the held setup
	// keeps from it.
	require.Eventually(t, func() bool { return gateWriters(m) == 1 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"GC's DELs end and GC waits for the gate")
	mu.Lock()
	got := slices.Clone(runs)
	mu.Unlock()
	require.Len(t, got, stale, "one bridge DEL per stale sandbox")
	assert.Equal(t, 1, maxInFlight(got), "one stale sandbox at a time while a setup is in flight")
	slices.SortFunc(got, func(a, b delRun) int { return a.start.Compare(b.start) })
	for i := 1; i < len(got); i++ {
		prev := got[i-1]
		assert.GreaterOrEqual(t, got[i].start.Sub(prev.end), rest*prev.end.Sub(prev.start),
			"the worker rested after the DELs of %s", prev.id)
	}

	// Paced, they keep the normal priority (see paced), as the setups do.
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	require.NoError(t, err)
	own := 20 - prio // Linux's getpriority returns 20 minus the nice value
	for _, p := range pods {
		dels := e.callsFor("DEL", p.ID)
		require.NotEmpty(t, dels, p.ID)
		for _, c := range dels {
			for _, th := range c.Threads {
				assert.Equal(t, calllog.Priority{Nice: own, Policy: calllog.SchedOther}, th, "a thread of the paced DEL of %s", p.ID)
			}
		}
	}

	addHeld.Release(t)
	require.NoError(t, testenv.RequireDone(t, setup, "SetUpPod"))
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))
	for _, p := range pods {
		e.assertDetached(p)
	}
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "stale"), "the stale sandboxes' addresses are released")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "held"), 1, "the held pod keeps its address")
	held.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(ctx, held))
}
