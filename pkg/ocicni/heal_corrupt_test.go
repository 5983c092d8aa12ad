package ocicni

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// hostileResult is a cached 0.4.0 result with a null inside "ips": libcni
// v1.3's converter dereferences it when it reads the entry for a 1.0.0
// network, as DelNetworkList does.
const hostileResult = `{"cniVersion":"0.4.0","ips":[null]}`

// rewriteEntry rewrites the pod's cache entry of network as another libcni
// user or a hand edit can leave it: its containerId no longer matches its
// file name, and its result is hostileResult.
func (e *itEnv) rewriteEntry(network string, pod PodNetwork) {
	e.t.Helper()
	path := filepath.Join(e.cacheDir, "results", e.cacheName(network, pod, "eth0"))
	raw, err := os.ReadFile(path)
	require.NoError(e.t, err)
	var entry map[string]json.RawMessage
	require.NoError(e.t, json.Unmarshal(raw, &entry))
	entry["containerId"] = json.RawMessage(`"someone-else"`)
	entry["result"] = json.RawMessage(hostileResult)
	raw, err = json.Marshal(entry)
	require.NoError(e.t, err)
	require.NoError(e.t, os.WriteFile(path, raw, 0o600))
}

// The reported crash loop: a DEL fails with code 11, so a retry is
// pending; the pod's cache entry is then rewritten (another container's
// ID, a result libcni's converter panics on); the fault clears. The retry,
// in this process or resumed by a new manager at start, must neither
// crash the process nor let libcni read the entry: it runs DEL without
// the cached result, keeps the entry until DEL succeeds, and then nothing
// of the pod is left. The control leaves the entry intact: its retry gets
// the cached result.
func TestHealRetryMeetsRewrittenEntry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool // the retry is resumed by a new manager at start
		intact  bool // the control: the entry is left as the ADD wrote it
	}{
		{name: "same process"},
		{name: "resumed at start", restart: true},
		{name: "entry intact", intact: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			flag := e.failingDELNet("flaky")
			var runs healRuns
			opts := []Option{WithHealing(fastHeal), WithPluginHook(runs.hook)}
			if tc.restart {
				opts = nil // healing off: nothing is retried before the restart
			}
			m := e.start(opts...)
			pod := e.pod("p")
			e.setUp(pod)

			err := m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS})
			assert.Equal(t, RetryLater, onlyFailure(t, err, "flaky").Class)
			path := filepath.Join(e.cacheDir, "results", e.cacheName("flaky", pod, "eth0"))
			if !tc.intact {
				e.rewriteEntry("flaky", pod)
			}
			if tc.restart {
				require.NoError(t, m.Shutdown())
			}
			require.NoError(t, os.Remove(flag))
			if tc.restart {
				m = e.start(WithHealing(fastHeal), WithPluginHook(runs.hook))
			}

			e.requireHealed(m, pod, "flaky")
			assert.NoFileExists(t, path, "the entry goes once DEL succeeded")
			assert.Positive(t, runs.count("DEL", pod.ID, reasonHeal))
			dels := e.callsFor("DEL", pod.ID)
			require.NotEmpty(t, dels)
			if tc.intact {
				assert.Contains(t, dels[len(dels)-1].Stdin, "prevResult", "the retry got the entry's cached result")
			} else {
				assert.NotContains(t, dels[len(dels)-1].Stdin, "prevResult", "the retry that succeeded ran without the rewritten result")
			}
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "flaky"))
		})
	}
}

// A cache entry rewritten after the inventory accepted it, before libcni
// reads it: libcni's panic is recovered, the entry is handled as corrupt
// (DEL again without it), and the file goes once that DEL succeeded. The
// teardown of the pod's other network is unaffected.
func TestLibcniPanicDuringDELIsRecovered(t *testing.T) {
	e := newFakeEnv(t)
	writeConf(t, e.confDir, "20-net2.conflist", conflist("net2", "1.0.0", "fake"))
	logger, hook := test.NewNullLogger()
	m, fx := e.manager(t, WithLogger(logrus.NewEntry(logger)))
	pod := PodNetwork{ID: "ctr1", NetNS: e.nsPath, Networks: []NetAttachment{{Name: "net"}, {Name: "net2"}}}
	_, err := m.SetUpPodWithContext(context.Background(), pod)
	require.NoError(t, err)
	entry := filepath.Join(e.cacheDir, "results", "net-ctr1-eth0")
	require.FileExists(t, entry)

	// The teardown plans both DELs, then runs net2's first: while it is
	// held, net's entry is rewritten with a result libcni panics on.
	gate := fx.Gate(fakecni.Match{Verb: "DEL", Network: "net2"})
	done := make(chan error, 1)
	go func() {
		done <- m.TearDownPodWithContext(context.Background(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS})
	}()
	gate.WaitEntered(t, 1)
	raw, err := os.ReadFile(entry)
	require.NoError(t, err)
	var f map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &f))
	f["result"] = json.RawMessage(hostileResult)
	raw, err = json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(entry, raw, 0o600))
	gate.Release()
	require.NoError(t, <-done)

	dels := fx.Calls("DEL")
	require.Len(t, dels, 2, "libcni panicked before it ran net's plugin, so it ran once, without the entry")
	assert.Equal(t, []string{"net2", "net"}, []string{dels[0].Network, dels[1].Network})
	assert.NotContains(t, dels[1].Config, "prevResult")
	assert.NoFileExists(t, entry, "the entry goes once DEL succeeded")
	warned := false
	for _, le := range hook.AllEntries() {
		if err, ok := le.Data[logrus.ErrorKey].(error); ok && errors.Is(err, ErrLibraryPanic) {
			var pe *PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, entry, pe.File, "the error names the file")
			warned = true
		}
	}
	assert.True(t, warned, "the panic is logged with the file")
}
