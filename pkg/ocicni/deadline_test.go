package ocicni

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// newExpiringCtx returns a context whose deadline passes when the test
// calls Expire (see testenv.ExpiringContext).
func newExpiringCtx() *testenv.ExpiringContext { return testenv.NewExpiringContext() }

// deadlineNets are the barriers of the "slow" network of [deadlineEnv].
type deadlineNets struct {
	add *testenv.Barrier // holds slow's ADD until the plugin is killed
	del *testenv.Barrier // holds slow's DEL, the rollback's first step
}

// deadlinePod sets up a pod on a bridge network and then on "slow", and
// lets the deadline pass while slow's ADD is held. The call returns at the
// deadline with the rollback still running in the background: it is held
// at slow's DEL until the test releases d.del.
func deadlinePod(t *testing.T, e *itEnv, m *Manager, d deadlineNets) (PodNetwork, *SetupError) {
	t.Helper()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "slow"}}
	ctx := newExpiringCtx()
	done := setUpAsync(ctx, m, pod)
	d.add.WaitEntered(t, 1)
	ctx.Expire()
	err := testenv.RequireDone(t, done, "SetUpPod after its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrRollbackPending, "returned before the rollback finished")
	var se *SetupError
	require.ErrorAs(t, err, &se)
	assert.True(t, se.RollbackPending)
	assert.Nil(t, se.Rollback)
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "slow", ne.Network)
	pod.Networks = nil
	return pod, se
}

// deadlineEnv writes the "good" bridge network and the "slow" one whose
// ADD and DEL are held at the returned barriers, and starts a manager
// with opts.
func deadlineEnv(t *testing.T, opts ...Option) (*itEnv, *Manager, deadlineNets) {
	t.Helper()
	e := newITEnv(t)
	d := deadlineNets{add: testenv.NewBarrier(t), del: testenv.NewBarrier(t)}
	e.recordedBridge("good", nil)
	e.addConf("slow", e.recorder("slow", "1.0.0", map[string]any{
		"add": d.add.Behaviour(nil),
		"del": d.del.Behaviour(nil),
	}))
	m := e.start(opts...)
	// Cleanups run last in, first out: release before the manager's
	// Shutdown, which waits for a rollback held at d.del.
	t.Cleanup(func() {
		d.add.Release(t)
		d.del.Release(t)
	})
	return e, m, d
}

// reservationsNow lists host-local's reservations for network without
// failing the test, for use off the test's goroutine.
func reservationsNow(dataDir, network string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dataDir, network))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var ips []string
	for _, ent := range ents {
		if net.ParseIP(ent.Name()) != nil {
			ips = append(ips, ent.Name())
		}
	}
	return ips, err
}

// The caller's deadline is a promise: the call returns at the deadline,
// and the rollback finishes in the background without any further call.
func TestSetupDeadlineRollsBackInBackground(t *testing.T) {
	t.Parallel()
	e, m, d := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m, d)

	d.del.WaitEntered(t, 1) // the rollback started on its own
	assert.Len(t, testenv.Reservations(t, e.dataDir, "good"), 1, "good's DEL comes after slow's")
	d.del.Release(t)
	require.Eventually(t, func() bool {
		return len(testenv.Reservations(t, e.dataDir, "good")) == 0 && len(e.orderFiles()) == 0
	}, 30*time.Second, 20*time.Millisecond, "the background rollback released the bridge's reservation")
	assert.Equal(t, []string{"slow", "good"}, e.callNetworks("DEL"), "rollback DELs in reverse order")
	e.assertClean(pod, "good")
}

// As CRI-O does, the runtime tears the pod down right after the failure:
// the teardown waits for the background rollback, then finds nothing left.
func TestTeardownWaitsForBackgroundRollback(t *testing.T) {
	t.Parallel()
	e, m, d := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m, d)
	d.del.WaitEntered(t, 1)

	// Another pod is never delayed by the rollback of the first: it comes
	// and goes while the rollback is held.
	other := e.pod("other")
	other.Networks = []NetAttachment{{Name: "good"}}
	e.setUp(other)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), other))

	teardown := make(chan error, 1)
	ctx := e.ctx()
	go func() { teardown <- m.TearDownPodWithContext(ctx, pod) }()
	require.Eventually(t, func() bool { return podLockRefs(m, pod.ID) == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"the teardown waits for the pod's lock, which the rollback holds")
	testenv.RequirePending(t, teardown, "the teardown returned while the rollback was held")
	d.del.Release(t)
	require.NoError(t, testenv.RequireDone(t, teardown, "TearDownPod"))
	e.assertClean(pod, "good")
	dels := e.callsFor("DEL", pod.ID)
	require.GreaterOrEqual(t, len(dels), 2)
	assert.Equal(t, []string{"slow", "good"}, []string{dels[0].Network, dels[1].Network},
		"the rollback's DELs ran first; the teardown ran after it released the pod")
}

// A setup of the same sandbox that arrives during the background rollback
// waits for it, within its own context.
func TestSetupWaitsForBackgroundRollbackWithinItsContext(t *testing.T) {
	t.Parallel()
	e, m, d := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m, d)
	d.del.WaitEntered(t, 1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.SetUpPodWithContext(ctx, PodNetwork{
		ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, NetNS: pod.NetNS,
		Networks: []NetAttachment{{Name: "good"}},
	})
	require.ErrorIs(t, err, context.Canceled)

	// A setup whose context is live waits for the rollback, then attaches.
	pod.Networks = []NetAttachment{{Name: "good"}}
	done := setUpAsync(e.ctx(), m, pod)
	require.Eventually(t, func() bool { return podLockRefs(m, pod.ID) == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"the setup waits for the pod's lock, which the rollback holds")
	testenv.RequirePending(t, done, "the setup returned while the rollback was held")
	d.del.Release(t)
	require.NoError(t, testenv.RequireDone(t, done, "SetUpPod"))
	assert.Len(t, testenv.Reservations(t, e.dataDir, "good"), 1)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "good")
}

// Shutdown waits for background rollbacks.
func TestShutdownWaitsForBackgroundRollback(t *testing.T) {
	t.Parallel()
	e, m, d := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m, d)
	d.del.WaitEntered(t, 1)

	// What was left the moment Shutdown returned.
	type shutdown struct {
		err  error
		left []string
	}
	done := make(chan shutdown, 1)
	go func() {
		err := m.Shutdown()
		left, rerr := reservationsNow(e.dataDir, "good")
		done <- shutdown{errors.Join(err, rerr), left}
	}()
	<-m.ctx.Done() // Shutdown has begun
	select {
	case s := <-done:
		require.FailNow(t, "Shutdown returned while the rollback was held", "err=%v", s.err)
	default:
	}
	d.del.Release(t)
	var s shutdown
	select {
	case s = <-done:
	case <-time.After(testenv.BarrierTimeout):
		require.FailNow(t, "Shutdown did not return after the rollback was released")
	}
	require.NoError(t, s.err)
	assert.Empty(t, s.left, "the rollback finished before Shutdown returned")
	e.assertClean(pod, "good")
}

// Shutdown keeps ocicni's meaning: it stops the watcher, and every method
// keeps working afterwards, reloading on a missing network.
func TestShutdownKeepsServing(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	m := e.start(withWatcher)
	require.NoError(t, m.Shutdown())
	require.NoError(t, m.Shutdown(), "idempotent")

	pod := e.pod("p")
	e.setUp(pod)
	require.NoError(t, m.Status())
	res, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&pod}))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "neta")

	// A file added after Shutdown is not watched, but a request for its
	// network reloads, as without a watcher.
	e.recordedBridge("netb", nil)
	assert.NotContains(t, m.Networks(), "netb")
	pod = e.pod("q")
	pod.Networks = []NetAttachment{{Name: "netb"}}
	e.setUp(pod)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "netb")
}

// A setup whose second network's ADD fails at once, and whose rollback
// DEL is slow, still returns by its deadline: the rollback started while
// the context was live, and goes on in the background once it ends, with
// the same ErrRollbackPending contract. It then finishes by itself.
func TestSetupDeadlineAfterFastFailureWithSlowRollback(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	e.recordedBridge("good", nil)
	e.addConf("failing", e.recorder("failing", "1.0.0", map[string]any{
		"add": map[string]any{"errorCode": 11, "errorMsg": "no capacity"},
		"del": del.Behaviour(nil),
	}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "failing"}}
	ctx := newExpiringCtx()
	done := setUpAsync(ctx, m, pod)

	del.WaitEntered(t, 1) // the ADD failed and the rollback is held, with the caller's context still live
	testenv.RequirePending(t, done, "the setup returned before its deadline while the rollback ran")
	ctx.Expire()
	err := testenv.RequireDone(t, done, "SetUpPod at its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrRollbackPending)
	requirePluginError(t, err, "failing", "ADD", 11)
	assert.Equal(t, 1, del.Inside(t), "the rollback is still held")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "good"), 1, "good's DEL comes after failing's")

	del.Release(t)
	require.Eventually(t, func() bool {
		return len(testenv.Reservations(t, e.dataDir, "good")) == 0 && len(e.orderFiles()) == 0
	}, 30*time.Second, 20*time.Millisecond, "the background rollback finished")
	m.e.rollbacks.Wait()
	pod.Networks = nil
	e.assertClean(pod, "good")
	assert.Equal(t, []string{"failing", "good"}, e.callNetworks("DEL"), "rollback DELs in reverse order")
}

// A background rollback holds its sandbox's lock but no node-wide lock:
// GC, which needs a moment with no pod operation in flight for its verbs,
// sends them while the rollback is still held.
func TestBackgroundRollbackHoldsNoNodeWideLock(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	d := deadlineNets{add: testenv.NewBarrier(t), del: testenv.NewBarrier(t)}
	e.recordedBridge("good", nil)
	e.addConf("slow", e.recorder("slow", "1.0.0", map[string]any{"add": d.add.Behaviour(nil), "del": d.del.Behaviour(nil)}))
	e.addConf("gcnet", e.gcConflist("gcnet", nil, nil)) // 1.1.0: gets the GC verb
	m := e.start()
	t.Cleanup(func() {
		d.add.Release(t)
		d.del.Release(t)
	})
	pod, _ := deadlinePod(t, e, m, d)
	d.del.WaitEntered(t, 1) // the rollback runs in the background, held

	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&pod}), "GC sent its verbs")
	assert.Len(t, e.calls("GC"), 1, "gcnet got the GC verb")
	assert.Equal(t, 1, d.del.Inside(t), "while the rollback is still held")
	d.del.Release(t)
	m.e.rollbacks.Wait()
	e.assertClean(pod, "good")
}
