package ocicni

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// netaPod sets up one pod on "neta", a recorded bridge network whose
// recorder takes recExtra, and returns the manager and the pod.
func (e *itEnv) netaPod(recExtra map[string]any) (*Manager, PodNetwork) {
	e.t.Helper()
	e.recordedBridge("neta", recExtra)
	m := e.start()
	pod := e.pod("p")
	e.setUp(pod)
	return m, pod
}

// editEntry rewrites the JSON of a cache file.
func editEntry(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	edit(m)
	data, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// editCachedConfig rewrites the config a cache entry holds.
func editCachedConfig(t *testing.T, m map[string]any, edit func(map[string]any)) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(m["config"].(string))
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(raw, &conf))
	edit(conf)
	raw, err = json.Marshal(conf)
	require.NoError(t, err)
	m["config"] = base64.StdEncoding.EncodeToString(raw)
}

// Every value read from a cache file passes a request's validation before
// it becomes a path, an environment variable or a plugin run. Before the
// fix, each of these deleted the victim file outside the cache dir and ran
// the plugin with the hostile name.
func TestHostileCacheContentStaysInCacheDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		victim string // relative to the cache dir's parent
		edit   func(t *testing.T, m map[string]any, pod PodNetwork)
	}{
		{
			name: "ifname escapes", victim: "victim-if",
			edit: func(_ *testing.T, m map[string]any, _ PodNetwork) { m["ifName"] = "eth0/../../../victim-if" },
		},
		{
			name: "cached config names another network", victim: "victim-name-{id}-eth0",
			edit: func(t *testing.T, m map[string]any, _ PodNetwork) {
				t.Helper()
				editCachedConfig(t, m, func(c map[string]any) { c["name"] = "../../victim-name" })
			},
		},
		{
			name: "network name escapes", victim: "victim-name-{id}-eth0",
			edit: func(_ *testing.T, m map[string]any, _ PodNetwork) { m["networkName"] = "../../victim-name" },
		},
		{
			name: "container ID escapes", victim: "victim-id-eth0",
			edit: func(_ *testing.T, m map[string]any, _ PodNetwork) { m["containerId"] = "x/../../../victim-id" },
		},
	}
	for _, tt := range tests {
		for _, verb := range []string{"teardown", "gc"} {
			t.Run(tt.name+"/"+verb, func(t *testing.T) {
				t.Parallel()
				e := newITEnv(t)
				m, pod := e.netaPod(nil)
				victim := filepath.Join(filepath.Dir(e.cacheDir), strings.ReplaceAll(tt.victim, "{id}", pod.ID))
				require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
				editEntry(t, e.cachePath("neta", pod, "eth0"), func(entry map[string]any) { tt.edit(t, entry, pod) })

				if verb == "teardown" {
					require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
				} else {
					require.NoError(t, m.GC(e.ctx(), nil))
				}

				assert.FileExists(t, victim, "nothing outside the cache dir is touched")
				for _, c := range e.calls("") {
					assert.Equal(t, pod.ID, c.ContainerID)
					assert.Equal(t, "eth0", c.IfName)
					assert.Equal(t, "neta", c.Network)
				}
				// The entry was corrupt, so neta's loaded config deleted
				// the attachment, and the entry went after it.
				assert.Len(t, e.callsFor("DEL", pod.ID), 1)
				e.assertClean(pod, "neta")
			})
		}
	}
}

// A FIFO, a symlink to /dev/zero or a file over the size bound in place
// of a cache entry must not block or exhaust teardown and GC; the
// attachment is deleted with the loaded config and the file removed.
func TestNonRegularOrHugeCacheEntry(t *testing.T) {
	t.Parallel()
	tests := map[string]func(t *testing.T, path string){
		"fifo": func(t *testing.T, path string) { t.Helper(); require.NoError(t, syscall.Mkfifo(path, 0o600)) },
		"symlink to /dev/zero": func(t *testing.T, path string) {
			t.Helper()
			require.NoError(t, os.Symlink("/dev/zero", path))
		},
		"over the size bound": func(t *testing.T, path string) {
			t.Helper()
			require.NoError(t, os.WriteFile(path, []byte(`{"kind":"cniCacheV1","pad":"`+strings.Repeat("x", cache.MaxFileSize)+`"}`), 0o600))
		},
	}
	for name, plant := range tests {
		for _, verb := range []string{"teardown", "gc"} {
			t.Run(name+"/"+verb, func(t *testing.T) {
				t.Parallel()
				e := newITEnv(t)
				m, pod := e.netaPod(nil)
				path := e.cachePath("neta", pod, "eth0")
				require.NoError(t, os.Remove(path))
				plant(t, path)

				if verb == "teardown" {
					require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
				} else {
					require.NoError(t, m.GC(e.ctx(), nil))
				}
				assert.Len(t, e.callsFor("DEL", pod.ID), 1)
				e.assertClean(pod, "neta")
			})
		}
	}
}

// An entry whose result libcni cannot decode: libcni's DEL would drop it
// before running the plugins, so a failing DEL lost the cached config.
// Now the DEL runs without it, and the entry stays until DEL succeeds.
func TestUndecodableCachedResultSurvivesFailedDEL(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	m, pod := e.netaPod(map[string]any{"del": map[string]any{"errorCode": 11, "onlyIfExists": flag}})
	path := e.cachePath("neta", pod, "eth0")
	editEntry(t, path, func(m map[string]any) { m["result"] = map[string]any{"cniVersion": "9.9.9"} })
	require.NoError(t, os.Remove(filepath.Join(e.confDir, "10-neta.conflist")), "only the cached config is left")

	err := m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID})
	requirePluginError(t, err, "neta", "DEL", 11)
	assert.FileExists(t, path, "the entry and its cached config survive the failed DEL")
	dels := e.callsFor("DEL", pod.ID)
	require.Len(t, dels, 1)
	assert.Nil(t, dels[0].PrevResult(), "libcni got no prevResult it could not decode")

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	e.assertClean(pod, "neta")
}

// threadNetNS names the calling thread's network namespace by pid and
// tid (/proc/<pid>/task/<tid>/ns/net), a path that passes the per-process
// check, so that only the host check refuses it. The caller keeps its OS
// thread locked while it uses the path. (/proc/<pid>/ns/net would not do:
// the main thread of the test process can be stranded in a pod's netns,
// see internal/netns.New.)
func threadNetNS(t *testing.T) string {
	t.Helper()
	task, err := os.Readlink("/proc/thread-self")
	require.NoError(t, err)
	return "/proc/" + task + "/ns/net"
}

// The host's network namespace is refused for setup, teardown and status,
// and a cache entry that names it does not make DEL run there.
func TestHostNetNSRefused(t *testing.T) {
	t.Parallel()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	m := e.start()
	host := threadNetNS(t)

	pod := e.pod("p")
	pod.NetNS = host
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	var iae *InvalidArgumentError
	require.ErrorAs(t, err, &iae)
	assert.Equal(t, "netns path", iae.Field)
	assert.Equal(t, "is the host's network namespace", iae.Reason)
	require.ErrorIs(t, m.TearDownPodWithContext(e.ctx(), pod), ErrInvalidArgument)
	_, err = m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Empty(t, e.calls(""), "no plugin ran")
	assert.Empty(t, e.orderFiles())

	pod = e.pod("q")
	e.setUp(pod)
	editEntry(t, e.cachePath("neta", pod, "eth0"), func(m map[string]any) { m["netns"] = host })
	require.NoError(t, m.diskCache().WriteOrder(pod.ID, []cache.Attachment{{Network: "neta", IfName: "eth0", NetNS: host}}))
	ns := pod.NetNS
	pod.NetNS = ""
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	dels := e.callsFor("DEL", pod.ID)
	require.Len(t, dels, 1)
	assert.Empty(t, dels[0].NetNS, "DEL ran without a netns, not in the host's")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"), "IPAM still released the address")
	assert.Empty(t, e.cacheFiles())
	assert.Equal(t, []string{"lo", "eth0"}, linksIn(t, ns), "the pod's interface is left to the netns' removal")
}
