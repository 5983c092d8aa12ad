package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// An attachment that was never cached (ADD failed after bridge attached,
// and the rollback DEL failed) is known only from the order record. The
// record must outlive every teardown or GC that could not DEL it: before
// the fix, each of these returned nil or dropped the record, and the IP
// and the veth leaked for good once the config and the plugin recovered.
// With the config file gone, the config saved with the record deletes it;
// only a record without one (written by an earlier version) waits for the
// file to return.
func TestOrderRecordKeptUntilAttachmentDeleted(t *testing.T) {
	t.Parallel()
	gc := func(e *itEnv, m *Manager, _ PodNetwork) error { return m.GC(e.ctx(), nil) }
	teardown := func(e *itEnv, m *Manager, pod PodNetwork) error {
		return m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID})
	}
	tests := []struct {
		name       string
		noConfig   bool // the network's config file is gone meanwhile
		noSaved    bool // and no config was saved with the record
		faultStays bool // the DEL fault is still on meanwhile
		run        func(e *itEnv, m *Manager, pod PodNetwork) error
	}{
		{name: "GC while the config file is absent", noConfig: true, run: gc},
		{name: "teardown by ID while the config file is absent", noConfig: true, run: teardown},
		{name: "GC while no config is left", noConfig: true, noSaved: true, run: gc},
		{name: "teardown by ID while no config is left", noConfig: true, noSaved: true, run: teardown},
		{
			name: "GC while the DEL still fails", faultStays: true,
			run: func(e *itEnv, m *Manager, _ PodNetwork) error { return m.GC(e.ctx(), nil) },
		},
		{
			name: "teardown by ID while the DEL still fails", faultStays: true,
			run: func(e *itEnv, m *Manager, pod PodNetwork) error {
				return m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			m, pod, flag := e.failedRollbackPod()
			confFile := filepath.Join(e.confDir, "10-neta.conflist")
			conf, err := os.ReadFile(confFile)
			require.NoError(t, err)
			if tt.noConfig {
				require.NoError(t, os.Remove(confFile))
				require.NoError(t, os.Remove(flag))
				m = e.restart()
			}
			if tt.noSaved {
				e.dropSavedConfigs()
			}

			err = tt.run(e, m, pod)
			if tt.noConfig && !tt.noSaved {
				require.NoError(t, err, "deleted with the saved config")
				assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "bridge's interface is gone")
				e.assertClean(pod, "neta")
				return
			}

			var ne *NetworkError
			require.ErrorAs(t, err, &ne, "the leak is reported, not nil")
			assert.Equal(t, "neta", ne.Network)
			if tt.noConfig {
				require.ErrorIs(t, err, ErrNoConfig)
			}
			assert.Equal(t, []string{pod.ID}, e.orderFiles(), "the record is the only memory of the attachment")
			assert.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 1)

			// Config back and fault cleared: the next GC deletes it.
			if tt.noConfig {
				require.NoError(t, os.WriteFile(confFile, conf, 0o600))
			} else {
				require.NoError(t, os.Remove(flag))
			}
			m = e.restart()
			require.NoError(t, m.GC(e.ctx(), nil))
			assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "bridge's interface is gone")
			e.assertClean(pod, "neta")
		})
	}
}

// A teardown by ID without config reports the orphaned attachment with its
// own outcome class, under the tolerant policy too, where it is logged.
func TestOrphanedOutcome(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	_, pod, flag := e.failedRollbackPod()
	require.NoError(t, os.Remove(filepath.Join(e.confDir, "10-neta.conflist")))
	require.NoError(t, os.Remove(flag))
	e.dropSavedConfigs() // a record of an earlier version: no config saved with it
	m := e.restart(WithTeardownPolicy(Tolerant))

	outcomes, err := m.TearDownPodOutcomes(e.ctx(), PodNetwork{ID: pod.ID})
	require.NoError(t, err, "tolerated")
	require.Len(t, outcomes, 1)
	assert.Equal(t, Orphaned, outcomes[0].Class)
	assert.True(t, outcomes[0].Tolerated)
	require.ErrorIs(t, outcomes[0].Err, ErrNoConfig)
	assert.Equal(t, []string{pod.ID}, e.orderFiles())
	assert.Empty(t, e.callsFor("DEL", pod.ID)[1:], "only the rollback's DEL ran")
}

// A rollback keeps in the record exactly the attachments whose DEL failed,
// and a teardown that deletes some of them drops only those.
func TestOrderRecordPrunedPerAttachment(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	e.recordedBridge("neta", map[string]any{"del": map[string]any{"errorCode": 11, "onlyIfExists": flag}})
	e.recordedBridge("netb", nil)
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "netb"}}
	e.setUp(pod)
	pod.Networks = nil

	err := m.TearDownPodWithContext(e.ctx(), pod)
	onlyFailure(t, err, "neta")
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	require.Len(t, order, 1)
	assert.Equal(t, "neta", order[0].Network, "netb left the record once deleted")
	assert.Equal(t, pod.NetNS, order[0].NetNS)

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "neta", "netb")
}
