package ocicni

import (
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// perProcessNetNS are netns paths that name the opener's own namespace.
var perProcessNetNS = []string{"/proc/self/ns/net", "/proc/thread-self/ns/net"}

// requirePerProcessRefusal checks that err refuses a netns path as a
// per-process one (not merely as the host's namespace).
func requirePerProcessRefusal(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, ErrInvalidArgument)
	var iae *InvalidArgumentError
	require.ErrorAs(t, err, &iae)
	assert.Equal(t, "netns path", iae.Field)
	assert.Contains(t, iae.Reason, "a per-process path")
}

// requireIgnoredWarning checks that the manager logged msg with an error
// that refuses a per-process netns path.
func (e *itEnv) requireIgnoredWarning(msg string) {
	e.t.Helper()
	for _, entry := range e.log.AllEntries() {
		if entry.Message == msg {
			err, _ := entry.Data[logrus.ErrorKey].(error)
			requirePerProcessRefusal(e.t, err)
			return
		}
	}
	require.Failf(e.t, "no warning", "%q was not logged", msg)
}

// recorderPod sets up a pod on "rec", a network of the recorder alone: a
// plugin that logs its calls and touches no namespace, so that even a
// manager that wrongly accepted a per-process path would harm nothing.
func (e *itEnv) recorderPod() (*Manager, PodNetwork) {
	e.t.Helper()
	e.addConf("rec", e.recorder("rec", "1.0.0", nil))
	m := e.start()
	pod := e.pod("p")
	e.setUp(pod)
	return m, pod
}

// testPerProcessNetNS checks that setup, teardown and status refuse a
// per-process netns path before any plugin runs, and that teardown
// ignores one stored in a cache entry or an order record: DEL runs
// without a netns. TestPerProcessNetNSRefused runs it in the test
// process, TestPerProcessNetNSStrandedHelper in a process whose main
// thread sits in another network namespace.
func testPerProcessNetNS(t *testing.T) {
	t.Helper()
	for _, path := range perProcessNetNS {
		t.Run("request/"+path, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			m, pod := e.recorderPod()
			ran := len(e.calls(""))

			bad := pod
			bad.NetNS = path
			_, err := m.SetUpPodWithContext(e.ctx(), bad)
			requirePerProcessRefusal(t, err)
			fresh := e.pod("q")
			fresh.NetNS = path
			_, err = m.SetUpPodWithContext(e.ctx(), fresh)
			requirePerProcessRefusal(t, err)
			requirePerProcessRefusal(t, m.TearDownPodWithContext(e.ctx(), bad))
			_, err = m.GetPodNetworkStatusWithContext(e.ctx(), bad)
			requirePerProcessRefusal(t, err)
			assert.Len(t, e.calls(""), ran, "no plugin ran")
			assert.Len(t, e.orderFiles(), 1, "only the set-up pod has an order record")

			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			assert.Empty(t, e.cacheFiles())
		})
		t.Run("cache entry/"+path, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			m, pod := e.recorderPod()
			editEntry(t, e.cachePath("rec", pod, "eth0"), func(m map[string]any) { m["netns"] = path })
			require.NoError(t, m.diskCache().RemoveOrder(pod.ID)) // its netns would win

			require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
			dels := e.callsFor("DEL", pod.ID)
			require.Len(t, dels, 1)
			assert.Empty(t, dels[0].NetNS, "DEL ran without a netns")
			e.requireIgnoredWarning("Ignoring the netns path of a cache entry")
			assert.Empty(t, e.cacheFiles())
		})
		t.Run("order record/"+path, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			m, pod := e.recorderPod()
			require.NoError(t, m.diskCache().WriteOrder(pod.ID, []cache.Attachment{{Network: "rec", IfName: "eth0", NetNS: path}}))
			require.NoError(t, os.Remove(e.cachePath("rec", pod, "eth0"))) // its netns would be used

			require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
			dels := e.callsFor("DEL", pod.ID)
			require.Len(t, dels, 1)
			assert.Empty(t, dels[0].NetNS, "DEL ran without a netns")
			e.requireIgnoredWarning("Ignoring the netns path of an attachment order record")
			assert.Empty(t, e.orderFiles())
		})
	}
}

func TestPerProcessNetNSRefused(t *testing.T) {
	t.Parallel()
	testPerProcessNetNS(t)
}
