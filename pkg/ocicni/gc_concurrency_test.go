//go:build !nogctests

package ocicni

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// gcAsync runs GC in a goroutine and returns its error channel. ctx is
// created by the caller, on the test's goroutine.
func gcAsync(ctx context.Context, m *Manager, valid []*PodNetwork) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.GC(ctx, valid) }()
	return done
}

// teardownAsync runs TearDownPodWithContext in a goroutine and returns its
// error channel.
func teardownAsync(ctx context.Context, m *Manager, pod PodNetwork) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.TearDownPodWithContext(ctx, pod) }()
	return done
}

// gateWriters returns how many callers wait for the gate exclusively.
func gateWriters(m *Manager) int { return m.e.gate.State().Waiting }

// poolConflistWith is poolConflist with a recorder chained after
// host-local: the GC verb reaches host-local, which releases every
// reservation it is not told is valid, and rec can hold a verb.
func (e *itEnv) poolConflistWith(name string, rec map[string]any) string {
	n := testenv.Alloc(e.t)
	return testenv.Conflist(name, "1.1.0", fmt.Sprintf(
		`{"type":"host-local","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`,
		e.dataDir, n.Subnet), e.recorder(name, "1.1.0", rec))
}

// enteredIDs returns the container IDs of the calls that reached b, from
// the lines "VERB containerID ifname" the recorder appends.
func enteredIDs(t *testing.T, b *testenv.Barrier) []string {
	t.Helper()
	data, err := os.ReadFile(b.EnteredFile)
	require.NoError(t, err)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, "entered line %q", line)
		ids = append(ids, f[1])
	}
	return ids
}

// GC neither stalls other pods nor hurts a pod being set up. A pod's ADD
// is held (it is not among the valid pods, as when the runtime listed its
// sandboxes just before creating it) while GC starts; GC's DEL of a stale
// container is held too. Meanwhile another pod is set up and torn down.
// GC's GC verbs then wait for the held ADD, and the held pod's attachment
// is valid for them: its address survives host-local's GC.
func TestGCDoesNotStallPodsAndSparesSetupInFlight(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	delHeld, addHeld := testenv.NewBarrier(t), testenv.NewBarrier(t)
	e.addConf("stale", e.gcConflist("stale", nil, map[string]any{"del": delHeld.Behaviour(nil)}))
	e.addConf("held", e.poolConflistWith("held", map[string]any{"add": addHeld.Behaviour(nil)}))
	e.addConf("free", e.gcConflist("free", nil, nil))
	m := e.start()
	ctx := e.ctx()

	stale := e.pod("stale")
	e.setUp(stale)
	held := e.pod("held")
	held.Networks = []NetAttachment{{Name: "held"}}
	setup := setUpAsync(ctx, m, held)
	addHeld.WaitEntered(t, 1)
	require.Len(t, testenv.Reservations(t, e.dataDir, "held"), 1, "host-local reserved before the held plugin")

	gc := gcAsync(ctx, m, []*PodNetwork{})
	delHeld.WaitEntered(t, 1)
	assert.Equal(t, []string{stale.ID}, enteredIDs(t, delHeld), "GC's DEL of the stale container is held")

	// Another pod comes and goes while GC's DEL and the ADD are held.
	other := e.pod("other")
	other.Networks = []NetAttachment{{Name: "free"}}
	e.setUp(other)
	other.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(ctx, other))
	testenv.RequirePending(t, gc, "GC returned while its DEL was held; the test proves nothing")
	testenv.RequirePending(t, setup, "the held ADD returned")

	// Once its DEL is done, GC waits for the held setup before any GC verb.
	delHeld.Release(t)
	require.Eventually(t, func() bool { return gateWriters(m) == 1 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"GC waits for the gate")
	assert.Empty(t, e.calls("GC"), "no GC verb while a setup is in flight")
	testenv.RequirePending(t, gc, "GC returned while a setup was in flight")
	released := time.Now()
	addHeld.Release(t)
	require.NoError(t, testenv.RequireDone(t, setup, "SetUpPod"))
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))

	gcs := e.calls("GC")
	require.Len(t, gcs, 3, "one GC verb per 1.1.0 network")
	for _, c := range gcs {
		assert.True(t, c.Time.After(released), "GC verb on %s ran after the held ADD was released", c.Network)
		if c.Network == "held" {
			assert.Equal(t, []any{gcAttachment(held.ID, "eth0")}, stdinValidAttachments(t, c))
		}
	}
	assert.Empty(t, e.callsFor("DEL", held.ID), "nothing of the held pod is deleted")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "held"), 1, "host-local's GC kept the held pod's address")
	_, err := m.GetPodNetworkStatusWithContext(ctx, held)
	require.NoError(t, err, "the held pod passes CHECK")

	assert.Equal(t, []string{"stale"}, e.networksFor("DEL", stale.ID))
	e.assertDetached(stale)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "stale"))
	held.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(ctx, held))
}

// A sandbox that GC planned to delete (an ADD that crashed after
// recording it) is set up again by the runtime while GC's only worker is
// busy with another container. GC finds under the sandbox's lock that a
// setup began since it started, and leaves the new attachment alone.
func TestGCSparesSandboxSetUpWhileItRuns(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"del": del.Behaviour(nil)}))
	m := e.start(WithGCWorkers(1))
	ctx := e.ctx()
	first := e.pod("first")
	e.setUp(first)
	retried := e.pod("retried")
	require.NoError(t, m.diskCache().WriteOrder(retried.ID, []cache.Attachment{{Network: "neta", IfName: "eth0", NetNS: retried.NetNS}}))

	gc := gcAsync(ctx, m, []*PodNetwork{})
	del.WaitEntered(t, 1)
	require.Equal(t, []string{first.ID}, enteredIDs(t, del), "the worker is busy with the cached stale container first")
	ip := resultIPs(t, e.setUp(retried)[0])
	del.Release(t)
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))

	assert.Empty(t, e.callsFor("DEL", retried.ID), "GC did not delete the sandbox set up while it ran")
	assert.Equal(t, ip, testenv.AddrsIn(t, retried.NetNS, "eth0"))
	assert.Equal(t, []string{reservation(t, ip[0])}, testenv.Reservations(t, e.dataDir, "neta"))
	gcs := e.calls("GC")
	require.Len(t, gcs, 1)
	assert.Equal(t, []any{gcAttachment(retried.ID, "eth0")}, stdinValidAttachments(t, gcs[0]))
	e.assertDetached(first)
	require.NoError(t, m.TearDownPodWithContext(ctx, retried))
	e.assertClean(retried, "neta")
}

// The runtime drops a stale sandbox's cache entries with ForgetPodCache
// after GC planned from them, while GC's only worker is busy with another
// container. GC still deletes the attachment, from the order record that
// ForgetPodCache wrote.
func TestGCDeletesWhatForgetPodCacheRecordedMeanwhile(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"del": del.Behaviour(nil)}))
	m := e.start(WithGCWorkers(1))
	ctx := e.ctx()
	// Cache entries are listed by file name, so first is planned first.
	first, forgotten := e.pod("first"), e.pod("forgotten")
	first.ID, forgotten.ID = "ctr-0"+randHex(t), "ctr-1"+randHex(t)
	e.setUp(first)
	e.setUp(forgotten)

	gc := gcAsync(ctx, m, []*PodNetwork{})
	del.WaitEntered(t, 1)
	require.Equal(t, []string{first.ID}, enteredIDs(t, del))
	removed, err := m.ForgetPodCache(ctx, forgotten)
	require.NoError(t, err)
	require.Len(t, removed, 1)
	del.Release(t)
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))

	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", forgotten.ID))
	e.assertDetached(first)
	e.assertDetached(forgotten)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Empty(t, e.cacheFiles())
}

// A stale container torn down while GC runs is deleted by one of the two,
// whichever holds its lock first; the other finds nothing left to do, and
// neither reports an error.
func TestGCAndTeardownOfStaleContainer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		gcFirst   bool
		wantCalls int // DEL calls for the container
	}{
		// GC plans from the entry, then finds it gone under the lock.
		{name: "teardown first", gcFirst: false, wantCalls: 1},
		// The teardown then finds nothing cached or recorded and sends
		// its usual DEL on the default network, which has nothing to do.
		{name: "GC first", gcFirst: true, wantCalls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			del := testenv.NewBarrier(t)
			e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"del": del.Behaviour(nil)}))
			m := e.start()
			ctx := e.ctx()
			pod := e.pod("stale")
			e.setUp(pod)

			var first, second <-chan error
			if tc.gcFirst {
				first = gcAsync(ctx, m, nil)
				del.WaitEntered(t, 1)
				second = teardownAsync(ctx, m, pod)
			} else {
				first = teardownAsync(ctx, m, pod)
				del.WaitEntered(t, 1)
				second = gcAsync(ctx, m, nil)
			}
			require.Eventually(t, func() bool { return podLockRefs(m, pod.ID) == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
				"the second waits for the container's lock")
			testenv.RequirePending(t, second, "the second returned while the first held the container")
			del.Release(t)
			require.NoError(t, testenv.RequireDone(t, first, "the first"))
			require.NoError(t, testenv.RequireDone(t, second, "the second"))

			assert.Len(t, e.callsFor("DEL", pod.ID), tc.wantCalls)
			e.assertClean(pod, "neta")
		})
	}
}

// delRun is one plugin DEL as a [PluginHook] saw it.
type delRun struct {
	id         string
	start, end time.Time
}

// maxInFlight returns the largest number of runs in flight at one time.
// The hook measures each run from just before it starts to just after it
// ends, so runs that follow each other on one goroutine never overlap.
func maxInFlight(runs []delRun) int {
	type event struct {
		at    time.Time
		delta int
	}
	events := make([]event, 0, 2*len(runs))
	for _, r := range runs {
		events = append(events, event{r.start, 1}, event{r.end, -1})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	n, peak := 0, 0
	for _, ev := range events {
		n += ev.delta
		peak = max(peak, n)
	}
	return peak
}

// GC deletes stale containers in parallel, up to WithGCWorkers at once,
// and never runs two DELs of one container at the same time. The pods
// were set up just before GC, which paces itself only while a setup is in
// flight here (see TestGCGivesWayToSetupInFlight).
func TestGCDeletesStaleContainersInParallel(t *testing.T) {
	t.Parallel()
	const workers, containers = 2, 5
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	for _, name := range []string{"neta", "netb"} {
		e.addConf(name, testenv.Conflist(name, "1.1.0", e.recorder(name, "1.1.0", map[string]any{"del": del.Behaviour(nil)})))
	}
	var (
		mu   sync.Mutex
		runs []delRun
	)
	hook := func(_ context.Context, r PluginRun) {
		if r.Verb == "DEL" {
			end := time.Now()
			mu.Lock()
			runs = append(runs, delRun{id: r.ContainerID, start: end.Add(-r.Duration), end: end})
			mu.Unlock()
		}
	}
	m := e.start(WithGCWorkers(workers), WithPluginHook(hook), withGCPace(gcPace{window: 0, rest: defaultGCPace.rest}))
	ctx := e.ctx()
	ids := make([]string, containers)
	for i := range ids {
		pod := e.pod(fmt.Sprint("p", i))
		pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "netb"}}
		e.setUp(pod)
		ids[i] = pod.ID
	}

	gc := gcAsync(ctx, m, nil)
	del.WaitEntered(t, workers)
	entered := enteredIDs(t, del)
	assert.Len(t, entered, workers, "no more DELs than workers at once")
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(entered))), workers, "each from another container: %v", entered)
	del.Release(t)
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, 2*containers, "one DEL per attachment")
	for _, id := range ids {
		assert.ElementsMatch(t, []string{"neta", "netb"}, e.networksFor("DEL", id))
	}
	assert.LessOrEqual(t, maxInFlight(runs), workers, "no more DELs at once than workers")
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			if a.id == b.id {
				assert.False(t, a.start.Before(b.end) && b.start.Before(a.end), "two DELs of %s overlapped", a.id)
			}
		}
	}
	assert.Empty(t, e.cacheFiles())
	assert.Empty(t, e.orderFiles())
}
