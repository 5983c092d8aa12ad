package ocicni

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// testPod is a pod whose request passes validation without root: its
// netns path only has to exist. It fails before any plugin runs, at the
// network lookup, when its network is not loaded.
func testPod(t *testing.T, network string) PodNetwork {
	t.Helper()
	return PodNetwork{
		Name: "p", Namespace: "ns", ID: "0123abcd", NetNS: t.TempDir(),
		Networks: []NetAttachment{{Name: network}},
	}
}

func TestCancelledCallerDoesNotFailTheReloadForEveryone(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "slow")
	g := e.exec.Gate(fakecni.Match{PluginType: "slow"})
	m := e.manager(t, withVersionWait(longWait))
	t.Cleanup(g.Release)

	// The file arrives unannounced; the pod's lookup reloads.
	writeConf(t, e.confDir, "10-slow.conflist", conflist("slow", "1.0.0", "slow"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := testPod(t, "slow")
	errc := make(chan error, 1)
	go func() {
		_, err := m.SetUpPodWithContext(ctx, pod)
		errc <- err
	}()
	g.WaitEntered(t, 1)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled, "the caller's wait ends with its context")
		require.ErrorIs(t, err, ErrNetworkNotFound)
	case <-time.After(loadBound):
		require.FailNow(t, "SetUpPod did not return after its context was cancelled")
	}

	// The reload went on under no caller's context: the answer loads the
	// network for everyone, and nothing recorded a VERSION failure.
	g.Release()
	require.Eventually(t, func() bool { return len(m.Networks()) == 1 }, loadBound, 5*time.Millisecond)
	assert.Equal(t, []string{"slow"}, m.Networks())
	assert.Empty(t, m.Skipped())
	assert.Equal(t, 1, e.versionCalls("slow"))
}

func TestLookupWaitEndsWithTheCallersContext(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "hang")
	g := e.exec.Gate(fakecni.Match{PluginType: "hang"}, fakecni.IgnoreContext()) // answers nothing, even when cancelled
	m := e.manager(t, withVersionWait(longWait))
	t.Cleanup(g.Release)

	writeConf(t, e.confDir, "10-hang.conflist", conflist("hang", "1.0.0", "hang"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	pod := testPod(t, "hang")
	var err error
	testenv.Within(t, loadBound, "SetUpPod", func() { _, err = m.SetUpPodWithContext(ctx, pod) })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrNetworkNotFound)

	// Shutdown waits for the VERSION call it started, which ends when the
	// plugin answers.
	g.Release()
	testenv.Within(t, loadBound, "Shutdown", func() { require.NoError(t, m.Shutdown()) })
}
