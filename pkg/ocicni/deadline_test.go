package ocicni

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// deadlinePod sets up a pod on a bridge network and then a network whose
// ADD takes 3 s (and DEL 1 s), under a 1 s deadline. The call returns at
// the deadline with the rollback still running in the background.
func deadlinePod(t *testing.T, e *itEnv, m *Manager) (PodNetwork, *SetupError) {
	t.Helper()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "slow"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := m.SetUpPodWithContext(ctx, pod)
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

func deadlineEnv(t *testing.T) (*itEnv, *Manager) {
	t.Helper()
	e := newITEnv(t)
	e.recordedBridge("good", nil)
	e.addConf("slow", e.recorder("slow", "1.0.0", map[string]any{
		"add": map[string]any{"sleepMs": 3000},
		"del": map[string]any{"sleepMs": 1000},
	}))
	return e, e.start()
}

// The caller's deadline is a promise: the call returns at the deadline,
// and the rollback finishes in the background without any further call.
func TestSetupDeadlineRollsBackInBackground(t *testing.T) {
	e, m := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m)

	require.Eventually(t, func() bool {
		return len(testenv.Reservations(t, e.dataDir, "good")) == 0 && len(e.orderFiles()) == 0
	}, 30*time.Second, 20*time.Millisecond, "the background rollback released the bridge's reservation")
	assert.Equal(t, []string{"slow", "good"}, e.callNetworks("DEL"), "rollback DELs in reverse order")
	e.assertClean(pod, "good")
}

// As CRI-O does, the runtime tears the pod down right after the failure:
// the teardown waits for the background rollback, then finds nothing left.
func TestTeardownWaitsForBackgroundRollback(t *testing.T) {
	e, m := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m)

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "good")
	dels := e.calls("DEL")
	require.GreaterOrEqual(t, len(dels), 2)
	assert.Equal(t, []string{"slow", "good"}, []string{dels[0].Network, dels[1].Network},
		"the rollback's DELs ran first; the teardown ran after it released the pod")

	// Another pod is never delayed by the rollback of the first.
	other := e.pod("other")
	other.Networks = []NetAttachment{{Name: "good"}}
	e.setUp(other)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), other))
}

// A setup of the same sandbox that arrives during the background rollback
// waits for it, within its own context.
func TestSetupWaitsForBackgroundRollbackWithinItsContext(t *testing.T) {
	e, m := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.SetUpPodWithContext(ctx, PodNetwork{ID: pod.ID, Name: pod.Name, Namespace: pod.Namespace, NetNS: pod.NetNS,
		Networks: []NetAttachment{{Name: "good"}}})
	require.ErrorIs(t, err, context.Canceled)

	pod.Networks = []NetAttachment{{Name: "good"}}
	e.setUp(pod) // waits for the rollback, then attaches
	assert.Len(t, testenv.Reservations(t, e.dataDir, "good"), 1)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "good")
}

// Shutdown waits for background rollbacks.
func TestShutdownWaitsForBackgroundRollback(t *testing.T) {
	e, m := deadlineEnv(t)
	pod, _ := deadlinePod(t, e, m)

	require.NoError(t, m.Shutdown())
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "good"), "the rollback finished before Shutdown returned")
	e.assertClean(pod, "good")
}

// Shutdown keeps ocicni's meaning: it stops the watcher, and every method
// keeps working afterwards, reloading on a missing network.
func TestShutdownKeepsServing(t *testing.T) {
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
