package cni_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The tests of this file call the face as Nomad's client
// (client/allocrunner/networking_cni.go) and nerdctl's OCI hooks
// (pkg/ocihook) call go-cni, with real plugins in real namespaces.

// callerNet is a bridge + host-local network whose recorder fails ADD
// (after IPAM ran) or DEL while a fault file exists, and logs every call.
type callerNet struct {
	n                  testenv.Net
	dataDir, logFile   string
	addFault, delFault string
	conf               []byte
	cacheDir           string
	name               string
	ctx                context.Context
}

func newCallerNet(t *testing.T, name string) *callerNet {
	t.Helper()
	testenv.RequireRoot(t)
	dir := t.TempDir()
	c := &callerNet{
		n: testenv.Alloc(t), dataDir: filepath.Join(dir, "ipam"), logFile: filepath.Join(dir, "calls.jsonl"),
		addFault: filepath.Join(dir, "add.fault"), delFault: filepath.Join(dir, "del.fault"),
		cacheDir: filepath.Join(dir, "cache"), name: name,
	}
	c.conf = []byte(testenv.BridgeConflist(name, "1.0.0", c.n, c.dataDir,
		testenv.RecorderConf(name, "1.0.0", c.logFile, map[string]any{
			"add": map[string]any{"errorCode": 11, "errorMsg": "add fault", "onlyIfExists": c.addFault},
			"del": map[string]any{"errorCode": 11, "errorMsg": "del fault", "onlyIfExists": c.delFault},
		})))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c.ctx = ctx
	return c
}

// face makes a face as Nomad does (plugin dir and interface prefix only)
// on the network's cache dir, then loads the network's conflist from
// memory as Nomad's ensureCNIInitialized does: only when Status answers
// that the face is not initialized.
func (c *callerNet) face(t *testing.T, opts ...ocicni.Option) *cni.Face {
	t.Helper()
	f, err := cni.New(cni.WithPluginDir([]string{pluginDir}), cni.WithInterfacePrefix("eth"),
		cni.WithEngineOptions(append([]ocicni.Option{ocicni.WithCacheDir(c.cacheDir)}, opts...)...))
	require.NoError(t, err)
	face := f.(*cni.Face)
	t.Cleanup(func() { _ = face.Shutdown() })
	if err := face.Status(); cni.IsCNINotInitialized(err) {
		require.NoError(t, face.Load(cni.WithConfListBytes(c.conf)))
	} else {
		require.NoError(t, err)
	}
	return face
}

func (c *callerNet) fault(t *testing.T, path string, on bool) {
	t.Helper()
	if on {
		require.NoError(t, os.WriteFile(path, nil, 0o600))
	} else {
		require.NoError(t, os.Remove(path))
	}
}

// requireClean checks that nothing of the network is left: no
// reservation, no cache entry, no record, no veth on the bridge.
func (c *callerNet) requireClean(t *testing.T) {
	t.Helper()
	assert.Empty(t, testenv.Reservations(t, c.dataDir, c.name), "reservations")
	assert.Empty(t, listDir(t, filepath.Join(c.cacheDir, "results")), "cache entries")
	assert.Empty(t, listDir(t, filepath.Join(c.cacheDir, "ocicni", "attachments")), "order records")
	assert.Empty(t, listDir(t, filepath.Join(c.cacheDir, "ocicni", "locks")), "sandbox lock files")
	assert.Empty(t, listDir(t, filepath.Join("/sys/class/net", c.n.Bridge, "brif")), "veths on the bridge")
}

// Nomad's ensureCNIInitialized loads its conflist only when Status says
// that nothing is loaded: a face that has loaded nothing says so, even
// with config files in its conf dir, and once loaded says it is ready.
func TestNomadStatusBeforeLoad(t *testing.T) {
	c := newCallerNet(t, "nomad")
	confDir := t.TempDir()
	testenv.WriteFile(t, confDir, "10-other.conflist", testenv.BridgeConflist("other", "1.0.0", testenv.Alloc(t), c.dataDir))
	f, err := cni.New(cni.WithPluginDir([]string{pluginDir}), cni.WithPluginConfDir(confDir), cni.WithInterfacePrefix("eth"),
		cni.WithEngineOptions(ocicni.WithCacheDir(c.cacheDir)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.(*cni.Face).Shutdown() })
	require.True(t, cni.IsCNINotInitialized(f.Status()), "nothing loaded: Nomad loads its own conflist next")
	require.NoError(t, f.Load(cni.WithConfListBytes(c.conf)))
	require.NoError(t, f.Status())

	ns := testenv.NewNS(t)
	res, err := f.Setup(c.ctx, "alloc1", ns)
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	assert.Len(t, testenv.Reservations(t, c.dataDir, "nomad"), 1, "the loaded conflist's network, not the conf dir's")
	require.NoError(t, f.Remove(c.ctx, "alloc1", ns))
	c.requireClean(t)
}

// Nomad retries a failed Setup up to three times, with no Remove in
// between: a chain that fails ADD after IPAM twice, then succeeds, ends
// with one reservation, the pod's, and its address in the netns.
func TestNomadSetupRetriedWithoutRemove(t *testing.T) {
	c := newCallerNet(t, "retry")
	f := c.face(t, ocicni.WithoutHealing())
	ns := testenv.NewNS(t)
	c.fault(t, c.addFault, true)
	for range 2 {
		_, err := f.Setup(c.ctx, "alloc1", ns)
		require.Error(t, err, "the recorder fails ADD after bridge and host-local ran")
	}
	c.fault(t, c.addFault, false)
	res, err := f.Setup(c.ctx, "alloc1", ns)
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	ip := res.Interfaces["eth0"].IPConfigs[0].IP.String()
	assert.Equal(t, []string{ip}, testenv.Reservations(t, c.dataDir, "retry"), "one reservation, not three")
	assert.Equal(t, []string{ip + "/24"}, testenv.AddrsIn(t, ns, "eth0"))
	require.NoError(t, f.Remove(c.ctx, "alloc1", ns))
	c.requireClean(t)
}

// After an agent restart Nomad calls Check, since ADD is not idempotent:
// a new face on the same cache dir checks what the old one set up, and
// reports an attachment whose interface is gone.
func TestNomadCheckAfterRestart(t *testing.T) {
	c := newCallerNet(t, "check")
	before := c.face(t)
	ns := testenv.NewNS(t)
	_, err := before.Setup(c.ctx, "alloc1", ns)
	require.NoError(t, err)
	require.NoError(t, before.Shutdown())

	after := c.face(t)
	require.NoError(t, after.Check(c.ctx, "alloc1", ns), "the restored allocation checks out")
	require.NoError(t, netns.Do(ns, func() error { return netns.DeleteLink("eth0") }))
	require.Error(t, after.Check(c.ctx, "alloc1", ns), "its eth0 is gone")
	require.NoError(t, after.Remove(c.ctx, "alloc1", ns))
	c.requireClean(t)
}

// nerdctl's postStop hook calls Remove with an empty netns path: the
// DELs run with the netns recorded at Setup while it exists, and
// release everything whether it does or not.
func TestNerdctlRemoveWithEmptyNetNSPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nsGone bool
	}{
		{"the netns still exists", false},
		{"the netns is gone", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCallerNet(t, "hooks")
			f := c.face(t)
			ns := testenv.NewNS(t)
			_, err := f.Setup(c.ctx, "ctr1", ns)
			require.NoError(t, err)
			if tc.nsGone {
				require.NoError(t, netns.Remove(ns))
			}
			require.NoError(t, f.Remove(c.ctx, "ctr1", ""))
			calls, err := calllog.Read(c.logFile)
			require.NoError(t, err)
			dels := calllog.Filter(calls, "DEL")
			require.NotEmpty(t, dels)
			if !tc.nsGone {
				assert.Equal(t, ns, dels[len(dels)-1].NetNS, "DEL ran with the netns recorded at Setup")
				assert.Empty(t, testenv.AddrsIn(t, ns, "eth0"), "eth0 is gone from the netns")
			}
			c.requireClean(t)
		})
	}
}

// nerdctl's hooks call Remove before every Setup and ignore its error: on
// a fresh container it runs no plugin that could fail, and the Setup after
// it works.
func TestNerdctlRemoveBeforeSetup(t *testing.T) {
	c := newCallerNet(t, "fresh")
	f := c.face(t)
	ns := testenv.NewNS(t)
	require.NoError(t, f.Remove(c.ctx, "ctr1", ""))
	_, err := f.Setup(c.ctx, "ctr1", ns)
	require.NoError(t, err)
	require.Len(t, testenv.Reservations(t, c.dataDir, "fresh"), 1)
	require.NoError(t, f.Remove(c.ctx, "ctr1", ns))
	c.requireClean(t)
}
