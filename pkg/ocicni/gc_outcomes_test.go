//go:build !nogctests

package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// TestGCOutcomes runs GC over a stale pod, a stale pod whose DEL on
// "busy" fails with code 11, a stale pod whose only cache entry is
// corrupt and whose network and saved config are gone, a corrupt cache
// file that names no container, and a valid pod. It checks the outcome
// GCOutcomes returns for each stale attachment, in the order the DELs ran
// per container, and that the error is the one GC returns. GC collects
// every network (WithGCAllNetworks), so that the file that names no
// container is reported too: by default GC leaves it alone.
func TestGCOutcomes(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	e.recordedBridge("fine", nil)
	e.recordedBridge("busy", map[string]any{"del": map[string]any{"errorCode": 11, "errorMsg": "busy", "onlyIfExists": flag}})
	fileGone := e.addConf("gone", e.gcConflist("gone", nil, nil))
	e.start()

	stale, failing, orphan, valid := e.pod("stale"), e.pod("failing"), e.pod("orphan"), e.pod("valid")
	stale.Networks = []NetAttachment{{Name: "fine"}}
	failing.Networks = []NetAttachment{{Name: "fine"}, {Name: "busy"}}
	orphan.Networks = []NetAttachment{{Name: "gone"}}
	valid.Networks = []NetAttachment{{Name: "fine"}}
	for _, p := range []PodNetwork{stale, failing, orphan, valid} {
		e.setUp(p)
	}
	orphanFile := e.cachePath("gone", orphan, "eth0")
	require.NoError(t, os.WriteFile(orphanFile, []byte(`{"kind":"cniCacheV1","containerId":`), 0o600))
	require.NoError(t, os.Remove(fileGone))
	junk := filepath.Join(e.cacheDir, "results", "junk")
	require.NoError(t, os.WriteFile(junk, []byte("{"), 0o600))
	e.dropSavedConfigs() // nothing left to delete the orphan with
	m := e.restart(WithGCAllNetworks())

	outcomes, err := m.GCOutcomes(e.ctx(), []*PodNetwork{&valid})

	// The error is GC's: the failed DEL, and the corrupt entries.
	require.ErrorIs(t, err, cache.ErrCorruptEntry)
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined)
	nets := map[string]*NetworkError{}
	for _, one := range joined.Unwrap() {
		var ne *NetworkError
		require.ErrorAs(t, one, &ne)
		nets[ne.Network] = ne
	}
	require.Len(t, nets, 3, "busy, gone and the junk file (no network): %v", err)
	requirePluginError(t, nets["busy"], "busy", "DEL", types.ErrTryAgainLater)
	require.ErrorIs(t, nets["gone"], ErrNoConfig)
	require.ErrorIs(t, nets[""], cache.ErrCorruptEntry)

	type row struct {
		id, network, ifname string
		class               OutcomeClass
	}
	byID := map[string][]row{}
	for _, o := range outcomes {
		byID[o.ContainerID] = append(byID[o.ContainerID], row{o.ContainerID, o.Network, o.IfName, o.Class})
		assert.False(t, o.Tolerated, "GC tolerates nothing: %+v", o)
		switch o.Class {
		case Deleted:
			require.NoError(t, o.Err)
		case RetryLater:
			var ce *types.Error
			require.ErrorAs(t, o.Err, &ce)
			assert.Equal(t, uint(types.ErrTryAgainLater), ce.Code)
		case Orphaned:
			require.ErrorIs(t, o.Err, cache.ErrCorruptEntry)
			require.ErrorIs(t, o.Err, ErrNoConfig)
			assert.Contains(t, o.Err.Error(), orphanFile)
		case Failed:
			require.ErrorIs(t, o.Err, cache.ErrCorruptEntry)
			assert.Contains(t, o.Err.Error(), junk)
		default:
			t.Errorf("unexpected outcome %+v", o)
		}
	}
	for _, tc := range []struct {
		name string
		pod  PodNetwork
		want []row // in the order the DELs ran
	}{
		{name: "deleted", pod: stale, want: []row{{stale.ID, "fine", "eth0", Deleted}}},
		{name: "DEL fails, in reverse ADD order", pod: failing, want: []row{
			{failing.ID, "busy", "eth1", RetryLater},
			{failing.ID, "fine", "eth0", Deleted},
		}},
		{name: "corrupt without config", pod: orphan, want: []row{{orphan.ID, "gone", "eth0", Orphaned}}},
		{name: "corrupt, names no container", want: []row{{"", "", "", Failed}}},
		{name: "valid", pod: valid, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, byID[tc.pod.ID])
		})
	}
	require.Len(t, outcomes, 5, "one outcome per stale attachment, nothing else")
	assert.Equal(t, Failed, outcomes[0].Class, "what planning could not attribute comes first")

	// The outcomes say what happened on disk and in the netns.
	assert.Empty(t, e.callsFor("DEL", valid.ID))
	e.assertDetached(stale)
	left := []string{e.cacheName("busy", failing, "eth1"), e.cacheName("gone", orphan, "eth0"), e.cacheName("fine", valid, "eth0"), "junk"}
	assert.ElementsMatch(t, left, e.cacheFiles())
	assert.Len(t, testenv.Reservations(t, e.dataDir, "fine"), 1, "only the valid pod keeps its address on fine")

	// Once busy succeeds, the next GC reports only the attachment it
	// still had to delete, and what it still cannot act on.
	require.NoError(t, os.Remove(flag))
	outcomes, err = m.GCOutcomes(e.ctx(), []*PodNetwork{&valid})
	require.ErrorIs(t, err, cache.ErrCorruptEntry)
	texts := make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		texts = append(texts, o.ContainerID+" "+o.Network+" "+o.IfName+" "+o.Class.String())
	}
	assert.ElementsMatch(t, []string{"   failed", failing.ID + " busy eth1 deleted", orphan.ID + " gone eth0 orphaned"}, texts)
}

// TestGCOutcomesNothingStale checks that a GC with nothing to delete
// returns no outcome and no error, and that a GC whose context has ended
// returns neither outcomes nor anything but the context's error.
func TestGCOutcomesNothingStale(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("fine", nil)
	m := e.start()
	valid := e.pod("valid")
	e.setUp(valid)

	outcomes, err := m.GCOutcomes(e.ctx(), []*PodNetwork{&valid})
	require.NoError(t, err)
	assert.Empty(t, outcomes)

	ctx, cancel := context.WithCancel(e.ctx())
	cancel()
	outcomes, err = m.GCOutcomes(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, outcomes)
	assert.Empty(t, e.callsFor("DEL", valid.ID))
}
