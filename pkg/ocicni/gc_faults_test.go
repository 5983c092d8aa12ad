//go:build !nogctests

package ocicni

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

func TestGCCorruptEntries(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	confB := e.gcConflist("netb", nil, nil)
	fileB := e.addConf("netb", confB)
	e.start()

	zero, plain, orphan := e.pod("zero"), e.pod("plain"), e.pod("orphan")
	orphan.Networks = []NetAttachment{{Name: "netb"}}
	e.setUp(zero)
	e.setUp(plain)
	e.setUp(orphan)
	orphan.Networks = nil
	zeroFile, orphanFile := e.cachePath("neta", zero, "eth0"), e.cachePath("netb", orphan, "eth0")
	require.NoError(t, os.Truncate(zeroFile, 0))
	require.NoError(t, os.WriteFile(orphanFile, []byte(`{"kind":"cniCacheV1","containerId":`), 0o600))
	require.NoError(t, os.Remove(fileB))
	e.dropSavedConfigs() // written by an earlier version: no config saved with the records
	m := e.restart()

	err := m.GC(e.ctx(), nil)

	// The corrupt entry of the removed network cannot be collected.
	require.ErrorIs(t, err, cache.ErrCorruptEntry)
	assert.Contains(t, err.Error(), orphanFile)
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "netb", ne.Network)
	assert.Equal(t, "DEL", ne.Verb)
	assert.Empty(t, e.callsFor("DEL", orphan.ID))
	assert.Equal(t, []string{e.cacheName("netb", orphan, "eth0")}, e.cacheFiles())
	assert.Len(t, testenv.Reservations(t, e.dataDir, "netb"), 1)
	assert.Contains(t, e.orderFiles(), orphan.ID, "kept while its corrupt entry remains: it holds the netns")

	// The zero-length entry got one DEL with neta's loaded config, inside
	// the netns recorded at ADD, and is gone.
	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", zero.ID))
	assert.NoFileExists(t, zeroFile)
	e.assertNoOrder(zero)
	e.assertDetached(zero)
	// The intact stale pod was collected as usual.
	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", plain.ID))
	e.assertDetached(plain)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))

	// Once netb's config is back, the next GC deletes the orphan with it.
	testenv.WriteFile(t, e.confDir, "99-netb.conflist", confB)
	m = e.restart()
	require.NoError(t, m.GC(e.ctx(), nil))
	assert.Equal(t, []string{"netb"}, e.networksFor("DEL", orphan.ID))
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "netb"))
	assert.Empty(t, e.cacheFiles())
	assert.Empty(t, e.orderFiles())
}

func TestGCContinuesPastErrors(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	e.recordedBridge("busy", map[string]any{"del": map[string]any{"errorCode": 11, "errorMsg": "busy", "onlyIfExists": flag}})
	e.recordedBridge("fine", nil)
	m := e.start()
	a, b := e.pod("a"), e.pod("b")
	a.Networks = []NetAttachment{{Name: "busy"}}
	b.Networks = []NetAttachment{{Name: "fine"}}
	e.setUp(a)
	e.setUp(b)
	a.Networks, b.Networks = nil, nil

	err := m.GC(e.ctx(), nil)

	requirePluginError(t, err, "busy", "DEL", types.ErrTryAgainLater)
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "eth0", ne.IfName)
	assert.Contains(t, err.Error(), `"busy"`)

	// b was still released; a keeps its cache entry and order record for
	// the next GC.
	assert.Equal(t, []string{"fine"}, e.networksFor("DEL", b.ID))
	e.assertDetached(b)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "fine"))
	assert.Equal(t, []string{e.cacheName("busy", a, "eth0")}, e.cacheFiles())
	assert.Equal(t, []string{a.ID}, e.orderFiles())

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.GC(e.ctx(), nil))
	e.assertClean(a, "busy", "fine")
}

func TestGCRemovesOrderRecordOfFailedRollback(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	m, pod, flag := e.failedRollbackPod()

	// GC deletes it with the loaded config, inside the netns recorded at ADD.
	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.GC(e.ctx(), nil))
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "the interface is gone too")
	assert.Len(t, e.callsFor("DEL", pod.ID), 2, "the rollback's DEL and GC's")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Empty(t, e.cacheFiles())
	assert.Empty(t, e.orderFiles())
}

// poolConflist returns a 1.1.0 network whose only plugin is host-local, so
// that the GC verb really releases every reservation it is not told is
// valid.
func (e *itEnv) poolConflist(name string) string {
	n := testenv.Alloc(e.t)
	return testenv.Conflist(name, "1.1.0", fmt.Sprintf(
		`{"type":"host-local","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`,
		e.dataDir, n.Subnet))
}

// TestGCRacesWithSetupAndTeardown runs GC over and over while pods come and
// go. The valid set holds every pod from before its SetUpPod starts until
// its TearDownPod returns, and cannot change during a GC call, as a runtime
// that lists its sandboxes under its own lock would pass. On "pool", a GC
// verb that ran while an ADD was between host-local and the cache would
// release that pod's address, and its CHECK would fail.
func TestGCRacesWithSetupAndTeardown(t *testing.T) {
	t.Parallel()
	const workers, rounds = 4, 3
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	e.addConf("pool", e.poolConflist("pool"))
	m := e.start()
	ctx := e.ctx()
	netns := make([]string, workers)
	for i := range netns {
		netns[i] = testenv.NewNS(t)
	}
	suffix := randHex(t)
	// anchor keeps a port on neta's bridge throughout. When the last port
	// goes the kernel zeroes the bridge's MAC, and concurrent ADDs may then
	// each pin a different one, which fails bridge's CHECK for reasons
	// that have nothing to do with GC.
	anchor := e.pod("anchor")
	e.setUp(anchor)

	var (
		mu    sync.Mutex // held across each GC call
		valid = map[string]PodNetwork{anchor.ID: anchor}
		errs  []error
	)
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				pod := PodNetwork{
					Name: fmt.Sprintf("w%d", w), Namespace: "test", UID: fmt.Sprintf("uid-w%d", w),
					ID: fmt.Sprintf("ctr-%s-w%d-r%d", suffix, w, r), NetNS: netns[w],
				}
				mu.Lock()
				valid[pod.ID] = pod
				mu.Unlock()
				both := pod
				both.Networks = []NetAttachment{{Name: "neta"}, {Name: "pool"}}
				if _, err := m.SetUpPodWithContext(ctx, both); err != nil {
					report(fmt.Errorf("setup %s: %w", pod.ID, err))
				}
				// CHECK proves that the interface and the reservation survived
				// every GC so far.
				if _, err := m.GetPodNetworkStatusWithContext(ctx, pod); err != nil {
					report(fmt.Errorf("status %s: %w", pod.ID, err))
				}
				if err := m.TearDownPodWithContext(ctx, pod); err != nil {
					report(fmt.Errorf("teardown %s: %w", pod.ID, err))
				}
				mu.Lock()
				delete(valid, pod.ID)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	gcs := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		mu.Lock()
		pods := make([]*PodNetwork, 0, len(valid))
		for _, p := range valid {
			pods = append(pods, &p)
		}
		if err := m.GC(ctx, pods); err != nil {
			errs = append(errs, fmt.Errorf("GC with %d valid pods: %w", len(pods), err))
		}
		mu.Unlock()
		gcs++
	}

	assert.Empty(t, errs)
	t.Logf("%d GC calls", gcs)
	require.NoError(t, m.TearDownPodWithContext(ctx, anchor))
	assert.Len(t, e.calls("DEL"), workers*rounds+1, "every DEL came from a teardown, none from GC")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "pool"))
	assert.Empty(t, e.cacheFiles())
	assert.Empty(t, e.orderFiles())
	for _, ns := range append(netns, anchor.NetNS) {
		assert.Equal(t, []string{"lo"}, linksIn(t, ns))
	}
}
