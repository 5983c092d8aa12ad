package ocicni

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

func TestSetupTracker(t *testing.T) {
	eth0 := []NetAttachment{{Name: "a", Ifname: "eth0"}}
	net1 := []NetAttachment{{Name: "b", Ifname: "net1"}}
	tr := newSetupTracker()
	released := 0
	release := func() { released++ }

	endBefore := tr.begin("before", eth0, release) // in flight when the watch opens
	endDone := tr.begin("done", eth0, release)
	endDone() // ended before the watch opens: not seen
	w := tr.watch()
	endDuring := tr.begin("during", net1, release) // begins while the watch is open
	endBefore()
	endDuring()
	w.stop()
	tr.begin("after", eth0, release)() // after the watch closed: not seen
	w.stop()                           // twice is fine

	assert.Equal(t, 4, released, "each end calls its release once")
	for _, tc := range []struct {
		id      string
		touched bool
	}{
		{"before", true}, {"during", true}, {"done", false}, {"after", false}, {"never", false},
	} {
		assert.Equal(t, tc.touched, w.touched(tc.id), tc.id)
	}
	assert.Equal(t, []string{"before", "during"}, w.ids())
	assert.Equal(t, map[string][]NetAttachment{"before": eth0, "during": net1}, w.attachments())
	assert.Empty(t, tr.active, "every setup ended")
	assert.Empty(t, tr.watches, "the watch is closed")
}

// writeEntry writes a libcni cache entry of a fake-plugin network at
// cniVersion, for tests that run no plugin to create one.
func writeEntry(t *testing.T, cacheDir, network, version, id, ifname string) {
	t.Helper()
	conf := base64.StdEncoding.EncodeToString([]byte(conflist(network, version, "fake")))
	dir := filepath.Join(cacheDir, "results")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, network+"-"+id+"-"+ifname), fmt.Appendf(nil,
		`{"kind":"cniCacheV1","containerId":%q,"config":%q,"ifName":%q,"networkName":%q,"result":{"cniVersion":%q}}`,
		id, conf, ifname, network, version), 0o600))
}

// A sandbox whose setup is in flight while GC runs may be missing from
// the valid pods the runtime listed: GC deletes none of its attachments,
// and passes them to the GC verb as valid. Checked without root, with the
// setup registered by hand as SetUpPodWithContext registers it.
func TestGCLeavesSetupsInFlightAlone(t *testing.T) {
	root := t.TempDir()
	confDir, binDir, cacheDir := filepath.Join(root, "net.d"), filepath.Join(root, "bin"), filepath.Join(root, "cache")
	for _, d := range []string{confDir, binDir} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	writeConf(t, confDir, "10-neta.conflist", `{"cniVersion":"1.1.0","name":"neta","plugins":[{"type":"fake"}]}`)
	writeConf(t, confDir, "20-netb.conflist", `{"cniVersion":"1.1.0","name":"netb","plugins":[{"type":"fake"}]}`)
	// busy's first network is cached, its second is being added; stale has
	// nothing in flight.
	writeEntry(t, cacheDir, "neta", "1.1.0", "busy", "eth0")
	writeEntry(t, cacheDir, "neta", "1.1.0", "stale", "eth0")
	c := cache.New(cacheDir)
	require.NoError(t, c.WriteOrder("busy", []cache.Attachment{{Network: "neta", IfName: "eth0"}, {Network: "netb", IfName: "net1"}}))
	fx := fakecni.New()
	fx.OnlyPlugins("fake")
	logger, _ := test.NewNullLogger()
	m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(cacheDir), WithoutWatcher(),
		WithExec(fx), WithLogger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })

	end := m.e.setups.begin("busy", []NetAttachment{{Name: "neta", Ifname: "eth0"}, {Name: "netb", Ifname: "net1"}}, func() {})
	require.NoError(t, m.GC(context.Background(), nil))
	end()

	var dels []string
	for _, c := range fx.Calls("DEL") {
		dels = append(dels, c.ContainerID)
	}
	assert.Equal(t, []string{"stale"}, dels, "nothing of the sandbox being set up is deleted")
	assert.Equal(t, map[string][]types.GCAttachment{
		"neta": {{ContainerID: "busy", IfName: "eth0"}},
		"netb": {{ContainerID: "busy", IfName: "net1"}},
	}, validAttachmentsOf(t, fx))
	order, err := c.ReadOrder("busy")
	require.NoError(t, err)
	assert.Len(t, order, 2, "its order record is untouched")
}

func TestWithGCWorkers(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want int
		err  bool
	}{
		{n: 1, want: 1}, {n: 8, want: 8}, {n: 0, err: true}, {n: -1, err: true},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			o := defaultOptions()
			err := WithGCWorkers(tc.n)(&o)
			if tc.err {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.gcWorkers)
		})
	}
	assert.Equal(t, min(max(runtime.GOMAXPROCS(0), 2), 8), defaultOptions().gcWorkers)
}
