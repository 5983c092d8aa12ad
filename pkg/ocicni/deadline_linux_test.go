package ocicni

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// TestSetupDeadlineKillsPluginAndItsChildren: an ADD that started a child
// holding its stdout and then hangs is killed with the child when the
// caller's deadline passes; the setup fails with the deadline, rolls back,
// and leaves nothing behind.
func TestSetupDeadlineKillsPluginAndItsChildren(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	childPidFile := filepath.Join(t.TempDir(), "child.pid")
	e.recordedBridge("good", nil)
	e.addConf("hung", e.recorder("hung", "1.0.0", map[string]any{
		"add": map[string]any{"childPidFile": childPidFile, "sleepMs": 600_000},
	}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "hung"}}

	ctx := newExpiringCtx()
	done := setUpAsync(ctx, m, pod)
	child := testenv.WaitPid(t, childPidFile)
	var plugin int
	require.Eventually(t, func() bool {
		for _, c := range e.calls("ADD") {
			if c.Network == "hung" {
				plugin = c.PID
			}
		}
		return plugin != 0
	}, testenv.BarrierTimeout, 5*time.Millisecond, "the hung ADD was logged")

	ctx.Expire() // the deadline passes while the ADD hangs
	err := testenv.RequireReturns(t, done)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var se *SetupError
	require.ErrorAs(t, err, &se)
	assert.Nil(t, se.Rollback)
	var cniErr *types.Error
	require.ErrorAs(t, err, &cniErr, "the killed plugin's error is kept")
	testenv.RequireGone(t, plugin, "plugin")
	testenv.RequireGone(t, child, "plugin's child")

	require.ErrorIs(t, err, ErrRollbackPending)
	m.e.rollbacks.Wait()
	assert.Equal(t, []string{"hung", "good"}, e.callNetworks("DEL"), "rollback ran after the deadline")
	e.assertClean(pod, "good")
}
