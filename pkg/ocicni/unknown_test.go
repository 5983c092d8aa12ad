package ocicni

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// libcni stops a list's DEL at a plugin that answers code 3, so bridge and
// host-local before it get no DEL. By default that is logged at Warn with
// the network; WithDELPastUnknownContainer runs every plugin's DEL.
func TestCode3InsideAChain(t *testing.T) {
	t.Parallel()
	for _, past := range []bool{false, true} {
		name := map[bool]string{false: "default", true: "past unknown"}[past]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.recordedBridge("gone", map[string]any{"del": map[string]any{"errorCode": 3, "errorMsg": "no such container"}})
			var opts []Option
			if past {
				opts = append(opts, WithDELPastUnknownContainer())
			}
			m := e.start(opts...)
			pod := e.pod("p")
			e.setUp(pod)

			outcomes, err := m.TearDownPodOutcomes(e.ctx(), PodNetwork{ID: pod.ID})
			require.NoError(t, err)
			require.Len(t, outcomes, 1)
			assert.Empty(t, e.cacheFiles())
			assert.Empty(t, e.orderFiles())
			if !past {
				assert.Equal(t, AlreadyGone, outcomes[0].Class)
				assert.Len(t, testenv.Reservations(t, e.dataDir, "gone"), 1, "bridge and host-local got no DEL")
				warned := false
				for _, entry := range e.log.AllEntries() {
					if entry.Level == logrus.WarnLevel && entry.Data["network"] == "gone" && entry.Data["verb"] == "DEL" {
						warned = true
					}
				}
				assert.True(t, warned, "the skipped DELs are logged at Warn with the network")
				return
			}
			assert.Equal(t, Deleted, outcomes[0].Class)
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "gone"), "host-local released the address")
			assert.Equal(t, []string{"lo"}, linksIn(t, pod.NetNS), "bridge deleted the interface")
			assert.Len(t, e.callsFor("DEL", pod.ID), 2, "the recorder's list DEL, then its own")
		})
	}
}
