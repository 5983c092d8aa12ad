package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

func TestStatusRunsCheckByVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version      string
		disableCheck bool
		wantCheck    bool
	}{
		{version: "0.3.1", wantCheck: false},
		{version: "0.4.0", wantCheck: true},
		{version: "1.0.0", wantCheck: true},
		{version: "1.0.0", disableCheck: true, wantCheck: false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			n := testenv.Alloc(t)
			list := testenv.BridgeConflist("net", tt.version, n, e.dataDir, e.recorder("net", tt.version, nil))
			if tt.disableCheck {
				list = `{"disableCheck":true,` + list[1:]
			}
			e.addConf("net", list)
			m := e.start(WithStatusAlwaysChecks())
			pod := e.pod("p")
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)

			status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err)
			require.Len(t, status, 1)
			assert.Equal(t, resultIPs(t, res[0]), resultIPs(t, status[0]))
			assert.Equal(t, tt.wantCheck, len(e.calls("CHECK")) == 1, "CHECK calls: %v", e.calls("CHECK"))
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "net")
		})
	}
}

func TestStatusFallsBackToNetnsWithoutCachedResult(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"0.3.1", "1.0.0"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.bridgeNet("net", version)
			m := e.start()
			pod := e.pod("p")
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			files := e.cacheFiles()
			require.Len(t, files, 1)
			require.NoError(t, os.Remove(filepath.Join(e.cacheDir, "results", files[0])))

			status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err)
			require.Len(t, status, 1)
			assert.Equal(t, resultIPs(t, res[0]), resultIPs(t, status[0]), "addresses read from the netns")
			assert.Equal(t, version, status[0].Result.Version())

			// Without the cache, teardown still releases the address
			// through the loaded config of the default network.
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "net")
		})
	}
}

func TestStatusCheckFailureNamesNetwork(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("chk", e.recorder("chk", "1.0.0", map[string]any{"check": map[string]any{"errorCode": 101, "errorMsg": "drifted"}}))
	m := e.start(WithStatusAlwaysChecks())
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	_, err = m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	requirePluginError(t, err, "chk", "CHECK", 101)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
}

// Status reads a pod's attachments through its inventory: with the cache
// entry removed by hand and the conf file gone, the config saved with the
// order record still names the network, and the netns gives the address.
func TestStatusUsesSavedConfig(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	e.start()
	pod := e.pod("p")
	ips := resultIPs(t, e.setUp(pod)[0])
	for _, f := range e.cacheFiles() {
		require.NoError(t, os.Remove(filepath.Join(e.cacheDir, "results", f)))
	}
	files, err := filepath.Glob(filepath.Join(e.confDir, "*-neta.conflist"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NoError(t, os.Remove(files[0]))
	m := e.restart()

	res, err := m.GetPodNetworkStatusWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, "neta", res[0].Name)
	assert.Equal(t, ips, resultIPs(t, res[0]))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	e.assertClean(pod, "neta")
}
