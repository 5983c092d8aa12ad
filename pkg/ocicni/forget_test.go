package ocicni

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// Since mid-2025 CRI-O deletes results/*<id>* by hand after any teardown
// error, marks the network stopped and never retries DEL. GC must still
// find the attachment through the order record and release it, even after
// the netns is gone. ForgetPodCache is the supported way to do the same.
func TestGCAfterRuntimeDropsTheCache(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"rm by hand, as CRI-O does", "ForgetPodCache"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			flag := faultFlag(t)
			m, pod := e.netaPod(map[string]any{"del": map[string]any{"errorCode": 11, "onlyIfExists": flag}})
			require.Error(t, m.TearDownPodWithContext(e.ctx(), pod), "the DEL fails")

			if how == "ForgetPodCache" {
				removed, err := m.ForgetPodCache(e.ctx(), PodNetwork{ID: pod.ID})
				require.NoError(t, err)
				assert.Equal(t, []string{e.cachePath("neta", pod, "eth0")}, removed)
				assert.Contains(t, e.log.LastEntry().Message, "Forgot CNI cache entry")
			} else {
				files, err := filepath.Glob(filepath.Join(e.cacheDir, "results", "*"+pod.ID+"*"))
				require.NoError(t, err)
				require.Len(t, files, 1)
				for _, f := range files {
					require.NoError(t, os.Remove(f))
				}
			}
			require.NoError(t, netns.Remove(pod.NetNS))
			require.NoError(t, os.Remove(flag))
			assert.Empty(t, e.cacheFiles())
			assert.Equal(t, []string{pod.ID}, e.orderFiles())
			require.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 1)

			require.NoError(t, e.restart().GC(e.ctx(), nil))
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"), "GC released the reservation")
			e.assertClean(pod, "neta")
			dels := e.callsFor("DEL", pod.ID)
			require.Len(t, dels, 2)
			assert.Equal(t, pod.NetNS, dels[1].NetNS, "GC's DEL used the netns recorded at ADD")
		})
	}
}

// ForgetPodCache records attachments that only the cache knew (another
// libcni user's entry) before it drops them, and runs no plugin.
func TestForgetPodCacheRecordsBeforeDropping(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	m := e.start()
	pod := e.pod("p")
	e.setUp(pod)
	e.addDelegateEntry(pod, "delegate", "net9")
	calls := len(e.calls(""))

	removed, err := m.ForgetPodCache(e.ctx(), PodNetwork{ID: pod.ID})
	require.NoError(t, err)
	assert.Len(t, removed, 2)
	assert.Empty(t, e.cacheFiles())
	assert.Len(t, e.calls(""), calls, "no plugin ran")
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	require.Len(t, order, 2)
	assert.Equal(t, "neta", order[0].Network)
	assert.Equal(t, "delegate", order[1].Network)
	assert.Equal(t, "net9", order[1].IfName)
	assert.Equal(t, pod.NetNS, order[1].NetNS)

	removed, err = m.ForgetPodCache(e.ctx(), PodNetwork{ID: pod.ID})
	require.NoError(t, err)
	assert.Empty(t, removed, "idempotent")
}

// A valid pod whose cache entry is gone (wiped by hand, or a cache that
// was never written) keeps its address when a CNI 1.1 plugin runs GC:
// its order record, and the default network on eth0 for a pod that names
// no networks, count as valid attachments.
func TestGCProtectsValidPodWithoutCacheEntry(t *testing.T) {
	t.Parallel()
	for _, wipe := range []string{"cache", "cache and order record"} {
		t.Run(wipe, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			n := testenv.Alloc(t)
			e.addConf("pool", testenv.Conflist("pool", "1.1.0", fmt.Sprintf(
				`{"type":"host-local","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`,
				e.dataDir, n.Subnet), e.recorder("pool", "1.1.0", nil)))
			m := e.start()
			v := e.pod("v")
			e.setUp(v)
			require.Len(t, testenv.Reservations(t, e.dataDir, "pool"), 1)
			require.NoError(t, os.Remove(e.cachePath("pool", v, "eth0")))
			if wipe != "cache" {
				require.NoError(t, m.diskCache().RemoveOrder(v.ID))
			}

			require.NoError(t, m.GC(e.ctx(), []*PodNetwork{{ID: v.ID, Name: v.Name, Namespace: v.Namespace}}))

			assert.Len(t, testenv.Reservations(t, e.dataDir, "pool"), 1, "host-local's GC kept the valid pod's address")
			gcs := e.calls("GC")
			require.Len(t, gcs, 1)
			assert.Equal(t, []any{gcAttachment(v.ID, "eth0")}, stdinValidAttachments(t, gcs[0]))
			assert.Empty(t, e.callsFor("DEL", v.ID))
		})
	}
}
