package ocicni

import (
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// Which options make a list's DEL stop at a plugin that answers code 3:
// only WithDELStopAtUnknownContainer; continuing is the default.
func TestUnknownContainerOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts []Option
		stop bool
	}{
		{"default continues", nil, false},
		{"stop", []Option{WithDELStopAtUnknownContainer()}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := defaultOptions()
			for _, opt := range tc.opts {
				require.NoError(t, opt(&o))
			}
			assert.Equal(t, tc.stop, o.delStopAtCode3)
		})
	}
}

// libcni stops a list's DEL at a plugin that answers code 3, so bridge and
// host-local before it would get no DEL. By default the manager then runs
// every plugin's DEL itself, those before the code-3 plugin and those after
// it; WithDELStopAtUnknownContainer keeps libcni's behaviour and logs a
// warning that names the network.
func TestCode3InsideAChain(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		opts  []Option
		after bool // a second recorder, logging to its own file, follows the code-3 one
		stop  bool
		// DELs the code-3 recorder and the one after it saw: libcni's list
		// DEL runs the list last to first until code 3, and the manager's
		// own DELs then run every plugin once more, last to first.
		goneDELs, afterDELs int
	}{
		{name: "default", goneDELs: 2},
		{name: "stop at unknown", opts: []Option{WithDELStopAtUnknownContainer()}, stop: true, goneDELs: 1},
		{name: "default, plugin after", after: true, goneDELs: 2, afterDELs: 2},
		{
			name: "stop at unknown, plugin after", opts: []Option{WithDELStopAtUnknownContainer()},
			after: true, stop: true, goneDELs: 1, afterDELs: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			extra := []string{e.recorder("gone", "1.0.0", map[string]any{
				"del": map[string]any{"errorCode": 3, "errorMsg": "no such container"},
			})}
			afterLog := filepath.Join(t.TempDir(), "after.jsonl")
			if tc.after {
				extra = append(extra, testenv.RecorderConf("gone", "1.0.0", afterLog, nil))
			}
			e.bridgeNet("gone", "1.0.0", extra...)
			m := e.start(tc.opts...)
			pod := e.pod("p")
			e.setUp(pod)
			require.Len(t, testenv.Reservations(t, e.dataDir, "gone"), 1)

			outcomes, err := m.TearDownPodOutcomes(e.ctx(), PodNetwork{ID: pod.ID})
			require.NoError(t, err, "code 3 is success")
			require.Len(t, outcomes, 1)
			assert.Empty(t, e.cacheFiles())
			assert.Empty(t, e.orderFiles())
			assert.Len(t, e.callsFor("DEL", pod.ID), tc.goneDELs, "DELs of the code-3 recorder")
			afterCalls, err := calllog.Read(afterLog)
			require.NoError(t, err)
			assert.Len(t, calllog.Filter(afterCalls, "DEL"), tc.afterDELs, "DELs of the plugin after it")

			warned := false
			for _, entry := range e.log.AllEntries() {
				if entry.Level == logrus.WarnLevel && entry.Data["network"] == "gone" && entry.Data["verb"] == "DEL" {
					warned = true
				}
			}
			if tc.stop {
				assert.Equal(t, AlreadyGone, outcomes[0].Class)
				assert.Len(t, testenv.Reservations(t, e.dataDir, "gone"), 1, "host-local got no DEL")
				assert.Contains(t, linksIn(t, pod.NetNS), "eth0", "bridge got no DEL")
				assert.True(t, warned, "the skipped DELs are logged at Warn with the network")
				return
			}
			assert.Equal(t, Deleted, outcomes[0].Class)
			require.NoError(t, outcomes[0].Err)
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "gone"), "host-local released the address")
			assert.Equal(t, []string{"lo"}, linksIn(t, pod.NetNS), "bridge deleted the interface")
			assert.False(t, warned, "nothing was skipped")
		})
	}
}
