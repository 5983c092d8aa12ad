package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// twoNetPod sets up a pod on two recorded bridge networks a (eth0) and b (eth1).
func twoNetPod(t *testing.T, e *itEnv, opts ...Option) (*Manager, PodNetwork) {
	t.Helper()
	e.recordedBridge("neta", nil)
	e.recordedBridge("netb", nil)
	m := e.start(opts...)
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "netb"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	pod.Networks = nil
	return m, pod
}

func (e *itEnv) cachePath(network string, pod PodNetwork, ifname string) string {
	name, err := cache.FileName(network, pod.ID, ifname)
	require.NoError(e.t, err)
	return filepath.Join(e.cacheDir, "results", name)
}

func TestTeardownCorruptCacheEntry(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{
		"zero length":    "",
		"truncated":      `{"kind":"cniCacheV1","containerId":`,
		"missing fields": `{"kind":"cniCacheV1","config":"e30="}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			m, pod := twoNetPod(t, e)
			require.NoError(t, os.WriteFile(e.cachePath("neta", pod, "eth0"), []byte(content), 0o600))

			// neta's config is still loaded: DEL runs with it and the
			// corrupt file goes; netb is deleted as usual.
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			assert.ElementsMatch(t, []string{"neta", "netb"}, e.callNetworks("DEL"))
			e.assertClean(pod, "neta", "netb")
		})
	}
}

// What a power loss leaves: an empty cache entry, and here its config file
// removed too. The config saved with the order record deletes it; only
// when that is gone as well is the attachment reported.
func TestTeardownCorruptEntryWithoutConfigFile(t *testing.T) {
	t.Parallel()
	for _, savedToo := range []bool{false, true} {
		t.Run(map[bool]string{false: "saved config", true: "saved config gone too"}[savedToo], func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			_, pod := twoNetPod(t, e)
			require.NoError(t, os.WriteFile(e.cachePath("neta", pod, "eth0"), nil, 0o600))
			files, _ := filepath.Glob(filepath.Join(e.confDir, "*-neta.conflist"))
			require.Len(t, files, 1)
			require.NoError(t, os.Remove(files[0]))
			if savedToo {
				e.dropSavedConfigs()
			}
			m := e.restart()

			err := m.TearDownPodWithContext(e.ctx(), pod)
			if !savedToo {
				require.NoError(t, err)
				assert.ElementsMatch(t, []string{"neta", "netb"}, e.callNetworks("DEL"))
				e.assertClean(pod, "neta", "netb")
				return
			}
			onlyFailure(t, err, "neta")
			require.ErrorIs(t, err, cache.ErrCorruptEntry)
			assert.Contains(t, err.Error(), e.cachePath("neta", pod, "eth0"))
			assert.Equal(t, []string{"netb"}, e.callNetworks("DEL"), "netb's DEL still ran")
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "netb"))
		})
	}
}

func TestTeardownPluginCrashOnDEL(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	e.recordedBridge("crashy", map[string]any{"del": map[string]any{"crash": true}})
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "crashy"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	pod.Networks = nil
	err = m.TearDownPodWithContext(e.ctx(), pod)
	failure := onlyFailure(t, err, "crashy")
	assert.Equal(t, Failed, failure.Class)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"), "the other network was still released")
}

func TestTeardownPluginBinaryRemovedSinceADD(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	binDir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(pluginDir, testenv.Recorder))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(binDir, "vanisher"), bin, 0o755))
	e.recordedBridge("neta", nil)
	e.addConf("gone", `{"cniVersion":"1.0.0","name":"gone","plugins":[{"type":"vanisher","logFile":"`+e.logFile+`"}]}`)
	m := e.start(WithBinDirs(pluginDir, binDir))
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "gone"}}
	_, err = m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(binDir, "vanisher")))

	pod.Networks = nil
	err = m.TearDownPodWithContext(e.ctx(), pod)
	failure := onlyFailure(t, err, "gone")
	assert.Equal(t, RetryLater, failure.Class)
	require.ErrorIs(t, err, ErrPluginNotFound)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
}
