package ocicni

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// heldNet writes a recorder network whose ADD is held at a barrier: the
// test waits until the plugin is inside ADD, acts while it is held, and
// releases it.
func heldNet(e *itEnv, name string) *testenv.Barrier {
	b := testenv.NewBarrier(e.t)
	e.addConf(name, e.recorder(name, "1.1.0", map[string]any{"add": b.Behaviour(nil)}))
	return b
}

// setUpAsync runs SetUpPodWithContext in a goroutine and returns its error
// channel. ctx is created by the caller, on the test's goroutine.
func setUpAsync(ctx context.Context, m *Manager, pod PodNetwork) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := m.SetUpPodWithContext(ctx, pod)
		done <- err
	}()
	return done
}

// podLockRefs returns how many operations hold or wait for the pod's lock.
func podLockRefs(m *Manager, id string) int { return m.e.pods.Refs(id) }

// gateState returns what holds the manager's gate: its readers, and
// whether a writer does.
func gateState(g *locks.Gate) (readers int, writer bool) {
	st := g.State()
	return st.Readers, st.Writer
}

func TestStatusAndReloadDoNotWaitForSlowADD(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	held := heldNet(e, "slow")
	m := e.start()
	pod := e.pod("slow")

	done := setUpAsync(e.ctx(), m, pod)
	held.WaitEntered(t, 1)

	// While the ADD is held: a reload with a new file and Status complete
	// before the ADD does.
	e.addConf("late", e.recorder("late", "1.0.0", nil))
	testenv.Within(t, loadBound, "reload", func() { assert.NoError(t, m.Reload(e.ctx())) })
	var err error
	testenv.Within(t, loadBound, "Status", func() { err = m.Status() })
	require.NoError(t, err)
	assert.Contains(t, m.Networks(), "late")
	testenv.RequirePending(t, done, "ADD finished while the plugin was held; the test proves nothing")

	held.Release(t)
	require.NoError(t, testenv.RequireDone(t, done, "SetUpPod"))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
}

func TestDifferentPodsRunConcurrently(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	held := heldNet(e, "slow")
	m := e.start()
	pods := []PodNetwork{e.pod("a"), e.pod("b")}
	ctx := e.ctx()
	dones := make([]<-chan error, len(pods))
	for i, p := range pods {
		dones[i] = setUpAsync(ctx, m, p)
	}

	// Both ADDs are inside the plugin at once: neither pod waits for the
	// other.
	held.WaitEntered(t, 2)
	for _, done := range dones {
		testenv.RequirePending(t, done, "an ADD finished while the plugin was held")
	}
	held.Release(t)
	for i, done := range dones {
		require.NoError(t, testenv.RequireDone(t, done, "SetUpPod of "+pods[i].Name))
	}
	for _, p := range pods {
		require.NoError(t, m.TearDownPodWithContext(e.ctx(), p))
	}
}

func TestSamePodIsSerializedAndLockWaitRespectsContext(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	held := heldNet(e, "slow")
	m := e.start()
	pod := e.pod("p")
	done := setUpAsync(e.ctx(), m, pod)
	held.WaitEntered(t, 1)

	// A teardown of the same pod waits for the lock; its context expires.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := m.TearDownPodWithContext(ctx, pod)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, e.calls("DEL"), "the waiting teardown ran no plugin")

	// Without a deadline it queues on the pod's lock behind the ADD, and
	// runs once the ADD is released.
	teardown := make(chan error, 1)
	tctx := e.ctx()
	go func() { teardown <- m.TearDownPodWithContext(tctx, pod) }()
	require.Eventually(t, func() bool { return podLockRefs(m, pod.ID) == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"the teardown waits for the pod's lock")
	testenv.RequirePending(t, teardown, "the teardown returned while the ADD was held")
	assert.Empty(t, e.calls("DEL"), "the queued teardown ran no plugin")
	released := time.Now()
	held.Release(t)
	require.NoError(t, testenv.RequireDone(t, teardown, "TearDownPod"))
	require.NoError(t, testenv.RequireDone(t, done, "SetUpPod"))
	adds, dels := e.calls("ADD"), e.calls("DEL")
	require.Len(t, adds, 1)
	require.Len(t, dels, 1)
	assert.True(t, dels[0].Time.After(released), "DEL ran after the held ADD was released")
}
