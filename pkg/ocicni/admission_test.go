package ocicni

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/admit"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// oneAtATime admits one setup and one teardown at a time, and never
// passes a slot on for overtime: a test that holds a plugin holds the
// queue.
var oneAtATime = WithAdmission(Admission{Setup: 1, Teardown: 1, Overtime: time.Hour})

// requireQueued waits until n operations wait in q.
func requireQueued(t *testing.T, q *admit.Queue, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return q.State().Waiting == n }, testenv.BarrierTimeout, time.Millisecond,
		"%d operations waiting for admission", n)
}

// requireUntouched checks that nothing of the pod was done: no plugin
// call, no order record, no cache entry.
func (e *itEnv) requireUntouched(pod PodNetwork) {
	e.t.Helper()
	assert.Empty(e.t, e.callsFor("", pod.ID), "no plugin ran for %s", pod.Name)
	order, err := e.m.diskCache().ReadOrder(pod.ID)
	require.NoError(e.t, err)
	assert.Nil(e.t, order, "no order record for %s", pod.Name)
}

func TestAdmissionOptions(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	tests := []struct {
		name            string
		opts            []Option
		setup, teardown int // the queues' bounds; 0: none
		overtime        time.Duration
		invalid         bool
	}{
		{name: "default", setup: 2 * cpus, teardown: 8 * cpus, overtime: time.Second},
		{name: "zero fields keep defaults", opts: []Option{WithAdmission(Admission{})}, setup: 2 * cpus, teardown: 8 * cpus, overtime: time.Second},
		{name: "bounds", opts: []Option{WithAdmission(Admission{Setup: 3, Teardown: 5, Overtime: time.Minute})}, setup: 3, teardown: 5, overtime: time.Minute},
		{name: "unbounded teardown", opts: []Option{WithAdmission(Admission{Teardown: Unbounded})}, setup: 2 * cpus, overtime: time.Second},
		{name: "disabled", opts: []Option{WithoutAdmission()}},
		{name: "negative bound", opts: []Option{WithAdmission(Admission{Setup: -2})}, invalid: true},
		{name: "negative overtime", opts: []Option{WithAdmission(Admission{Overtime: -time.Second})}, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(append([]Option{WithConfDir(t.TempDir()), WithCacheDir(t.TempDir()), WithoutWatcher(), WithoutHealing()}, tt.opts...)...)
			if tt.invalid {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Shutdown() })
			assert.Equal(t, tt.setup, m.e.admit.setup.Limit())
			assert.Equal(t, tt.teardown, m.e.admit.teardown.Limit())
			if tt.setup > 0 {
				assert.Equal(t, tt.overtime, m.e.admit.setup.Overtime())
			}
		})
	}
}

// Setups run their plugins in arrival order, one at a time here: the
// others wait holding nothing, and one whose deadline passes while it
// waits returns having run nothing.
func TestAdmissionServesSetupsInArrivalOrder(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	held := heldNet(e, "held")
	m := e.start(oneAtATime)
	ctx := e.ctx()

	first := e.pod("first")
	done := []<-chan error{setUpAsync(ctx, m, first)}
	held.WaitEntered(t, 1)
	var queued []PodNetwork
	for i, name := range []string{"second", "third", "fourth"} {
		pod := e.pod(name)
		done = append(done, setUpAsync(ctx, m, pod))
		requireQueued(t, m.e.admit.setup, i+1)
		queued = append(queued, pod)
	}
	for _, pod := range queued {
		e.requireUntouched(pod) // not even lo's bring-up or the record
	}

	late := e.pod("late")
	expiring := newExpiringCtx()
	lateDone := setUpAsync(expiring, m, late)
	requireQueued(t, m.e.admit.setup, 4)
	expiring.Expire()
	err := testenv.RequireDone(t, lateDone, "a setup whose deadline passed in the queue")
	require.ErrorIs(t, err, ErrNotAdmitted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, admit.State{Running: 1, Waiting: 3}, m.e.admit.setup.State(), "it left the queue")
	e.requireUntouched(late)
	assert.Equal(t, 1, held.Inside(t), "only the first setup's plugin ran meanwhile")

	held.Release(t)
	for i, d := range done {
		require.NoError(t, testenv.RequireDone(t, d, "setup"), "setup %d", i)
	}
	want := []string{first.ID}
	for _, pod := range queued {
		want = append(want, pod.ID)
	}
	assert.Equal(t, want, enteredIDs(t, held), "the plugins ran in arrival order")
	assert.Equal(t, admit.State{}, m.e.admit.setup.State())
	for _, pod := range append(queued, first) {
		require.NoError(t, m.TearDownPodWithContext(ctx, pod))
	}
}

// While setups wait for admission, whatever runs no setup's ADD goes on:
// Status, a pod's status (CHECK), a repeated setup of a pod that is
// attached already, and a teardown, which has its own queue.
func TestAdmissionQueuesNeitherStatusNorNoPluginCalls(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("good", nil)
	held := heldNet(e, "held")
	m := e.start(oneAtATime)
	ctx := e.ctx()

	attached := e.pod("attached")
	attached.Networks = []NetAttachment{{Name: "good"}}
	results := e.setUp(attached)

	blocker := e.pod("blocker")
	blocker.Networks = []NetAttachment{{Name: "held"}}
	blocked := setUpAsync(ctx, m, blocker)
	held.WaitEntered(t, 1)
	waiter := e.pod("waiter")
	waiter.Networks = []NetAttachment{{Name: "good"}}
	waiting := setUpAsync(ctx, m, waiter)
	requireQueued(t, m.e.admit.setup, 1)

	require.NoError(t, testenv.RequireDone(t, async(func() error { return m.StatusWithContext(ctx) }), "Status"))
	require.NoError(t, testenv.RequireDone(t, async(func() error {
		_, err := m.GetPodNetworkStatusWithContext(ctx, attached)
		return err
	}), "GetPodNetworkStatus"))
	var again []NetResult
	require.NoError(t, testenv.RequireDone(t, async(func() error {
		var err error
		again, err = m.SetUpPodWithContext(ctx, attached)
		return err
	}), "a repeated setup"))
	assert.Equal(t, resultIPs(t, results[0]), resultIPs(t, again[0]), "the cached result")
	require.NoError(t, testenv.RequireDone(t, teardownAsync(ctx, m, attached), "a teardown"))
	e.assertDetached(attached)

	testenv.RequirePending(t, waiting, "the queued setup ran past the held one")
	held.Release(t)
	require.NoError(t, testenv.RequireDone(t, blocked, "held setup"))
	require.NoError(t, testenv.RequireDone(t, waiting, "queued setup"))
	require.NoError(t, m.TearDownPodWithContext(ctx, blocker))
	require.NoError(t, m.TearDownPodWithContext(ctx, waiter))
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "good"))
}

// async runs f in a goroutine and returns its error channel.
func async(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// Teardowns queue in their own order; one whose deadline passes in the
// queue changes nothing, and a later teardown finds all of it.
func TestAdmissionServesTeardownsInArrivalOrder(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	b := testenv.NewBarrier(t)
	e.recordedBridge("net", map[string]any{"del": b.Behaviour(nil)})
	m := e.start(oneAtATime)
	ctx := e.ctx()
	pods := []PodNetwork{e.pod("a"), e.pod("b"), e.pod("c")}
	for _, pod := range pods {
		e.setUp(pod)
	}
	require.Len(t, testenv.Reservations(t, e.dataDir, "net"), 3)

	first := teardownAsync(ctx, m, pods[0])
	b.WaitEntered(t, 1)
	second := teardownAsync(ctx, m, pods[1])
	requireQueued(t, m.e.admit.teardown, 1)
	expiring := newExpiringCtx()
	third := teardownAsync(expiring, m, pods[2])
	requireQueued(t, m.e.admit.teardown, 2)
	expiring.Expire()
	err := testenv.RequireDone(t, third, "a teardown whose deadline passed in the queue")
	require.ErrorIs(t, err, ErrNotAdmitted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	order, err := m.diskCache().ReadOrder(pods[2].ID)
	require.NoError(t, err)
	assert.NotNil(t, order, "the record is kept")
	assert.Equal(t, 1, b.Inside(t))

	b.Release(t)
	require.NoError(t, testenv.RequireDone(t, first, "teardown"))
	require.NoError(t, testenv.RequireDone(t, second, "teardown"))
	require.NoError(t, m.TearDownPodWithContext(ctx, pods[2]))
	assert.Equal(t, []string{pods[0].ID, pods[1].ID, pods[2].ID}, enteredIDs(t, b), "DELs in arrival order")
	for _, pod := range pods {
		e.assertDetached(pod)
	}
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "net"))
}

// A failed setup's rollback runs under the setup's own admission: it
// waits neither for a setup slot (which it holds) nor for a teardown slot
// (held here by a teardown that cannot finish meanwhile).
func TestAdmissionRollbackNeverWaitsForItself(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	stuck := testenv.NewBarrier(t)
	e.recordedBridge("good", nil)
	e.addConf("bad", e.recorder("bad", "1.0.0", map[string]any{"add": map[string]any{"errorCode": 11, "errorMsg": "no"}}))
	e.addConf("stuck", e.recorder("stuck", "1.0.0", map[string]any{"del": stuck.Behaviour(nil)}))
	m := e.start(oneAtATime)
	ctx := e.ctx()

	holder := e.pod("holder")
	holder.Networks = []NetAttachment{{Name: "stuck"}}
	e.setUp(holder)
	holding := teardownAsync(ctx, m, holder)
	stuck.WaitEntered(t, 1) // the only teardown slot is taken

	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "bad"}}
	err := testenv.RequireDone(t, setUpAsync(ctx, m, pod), "a setup whose rollback needs DELs")
	var se *SetupError
	require.ErrorAs(t, err, &se)
	assert.Nil(t, se.Rollback, "the rollback finished")
	assert.False(t, se.RollbackPending)
	assert.Equal(t, []string{"bad", "good"}, e.networksFor("DEL", pod.ID))
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "good"))
	assert.Equal(t, admit.State{}, m.e.admit.setup.State(), "the slot came back")

	stuck.Release(t)
	require.NoError(t, testenv.RequireDone(t, holding, "teardown"))
	e.assertDetached(holder)
}

// A rollback left in the background by its caller's deadline gives its
// admission up: the next pod is set up while the rollback is held.
func TestAdmissionBackgroundRollbackHoldsNoSlot(t *testing.T) {
	t.Parallel()
	e, m, d := deadlineEnv(t, oneAtATime)
	pod, _ := deadlinePod(t, e, m, d)
	d.del.WaitEntered(t, 1)

	other := e.pod("other")
	other.Networks = []NetAttachment{{Name: "good"}}
	require.NoError(t, testenv.RequireDone(t, setUpAsync(e.ctx(), m, other), "a setup while a rollback is held"))
	require.Len(t, testenv.Reservations(t, e.dataDir, "good"), 2, "the other pod's and the held rollback's")

	d.del.Release(t)
	require.Eventually(t, func() bool { return len(e.orderFiles()) == 1 }, testenv.BarrierTimeout, 10*time.Millisecond,
		"the rollback finished")
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), other))
	e.assertClean(pod, "good")
}

// Healing's retries and GC's DELs run in no queue: with the setup and
// the teardown queue both held, a failed DEL heals and GC deletes a
// stale sandbox.
func TestAdmissionLeavesHealingAndGCAlone(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := e.failingDELNet("flaky")
	addHeld, delHeld := testenv.NewBarrier(t), testenv.NewBarrier(t)
	e.addConf("held", e.recorder("held", "1.0.0", map[string]any{"add": addHeld.Behaviour(nil)}))
	e.addConf("stuck", e.recorder("stuck", "1.0.0", map[string]any{"del": delHeld.Behaviour(nil)}))
	m := e.start(oneAtATime, WithHealing(fastHeal))
	ctx := e.ctx()

	failed, stale := e.pod("failed"), e.pod("stale")
	for _, pod := range []PodNetwork{failed, stale} {
		pod.Networks = []NetAttachment{{Name: "flaky"}}
		e.setUp(pod)
	}
	err := m.TearDownPodWithContext(ctx, PodNetwork{ID: failed.ID, NetNS: failed.NetNS})
	assert.Equal(t, RetryLater, onlyFailure(t, err, "flaky").Class)

	holder := e.pod("holder")
	holder.Networks = []NetAttachment{{Name: "stuck"}}
	e.setUp(holder)
	holding := teardownAsync(ctx, m, holder)
	delHeld.WaitEntered(t, 1)
	blocker := e.pod("blocker")
	blocker.Networks = []NetAttachment{{Name: "held"}}
	blocked := setUpAsync(ctx, m, blocker)
	addHeld.WaitEntered(t, 1)

	require.NoError(t, os.Remove(flag)) // the fault clears
	e.requireNoRecord(m, failed.ID, "the background retry removed the order record")
	gc := gcAsync(ctx, m, []*PodNetwork{&holder})
	e.requireNoRecord(m, stale.ID, "GC deleted the stale sandbox")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "flaky"), "both released their addresses")
	assert.Equal(t, admit.State{Running: 1}, m.e.admit.setup.State(), "the setup queue was held throughout")
	assert.Equal(t, admit.State{Running: 1}, m.e.admit.teardown.State(), "the teardown queue was held throughout")

	addHeld.Release(t)
	delHeld.Release(t)
	require.NoError(t, testenv.RequireDone(t, blocked, "held setup"))
	require.NoError(t, testenv.RequireDone(t, holding, "held teardown"))
	require.NoError(t, testenv.RequireDone(t, gc, "GC"))
	require.NoError(t, m.TearDownPodWithContext(ctx, blocker))
}

// requireNoRecord waits until sandbox id has no order record, as a
// finished teardown, heal retry or GC leaves it.
func (e *itEnv) requireNoRecord(m *Manager, id, msg string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		order, err := m.diskCache().ReadOrder(id)
		return err == nil && order == nil
	}, testenv.BarrierTimeout, 10*time.Millisecond, msg)
}
