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

// detachedNet is a bridge + host-local + recorder network whose recorder
// fails DEL while fault exists, and the namespace that stands for
// RootlessKit's detached one.
type detachedNet struct {
	n                testenv.Net
	dataDir, logFile string
	fault            string
	conf             []byte
	detached         string // its path
	detachedName     string // its /proc link name, as the recorder logs it
}

func newDetachedNet(t *testing.T) *detachedNet {
	t.Helper()
	testenv.RequireRoot(t)
	dir := t.TempDir()
	d := &detachedNet{
		n: testenv.Alloc(t), dataDir: filepath.Join(dir, "ipam"), logFile: filepath.Join(dir, "calls.jsonl"),
		fault: filepath.Join(dir, "fault"), detached: testenv.NewNS(t),
	}
	d.conf = []byte(testenv.BridgeConflist("detached", "1.0.0", d.n, d.dataDir,
		testenv.RecorderConf("detached", "1.0.0", d.logFile, map[string]any{
			"del": map[string]any{"errorCode": 11, "errorMsg": "injected", "onlyIfExists": d.fault},
		})))
	require.NoError(t, netns.Do(d.detached, func() error {
		var err error
		d.detachedName, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}))
	return d
}

// bridgeIn reports whether the network's bridge exists on the host and in
// the detached namespace.
func (d *detachedNet) bridgeIn(t *testing.T) (host, detached bool) {
	t.Helper()
	host, err := netns.LinkExists(d.n.Bridge)
	require.NoError(t, err)
	require.NoError(t, netns.Do(d.detached, func() error {
		detached, err = netns.LinkExists(d.n.Bridge)
		return err
	}))
	return host, detached
}

// ownNetNSes returns the namespaces the recorder ran in for verb.
func (d *detachedNet) ownNetNSes(t *testing.T, verb string) []string {
	t.Helper()
	calls, err := calllog.Read(d.logFile)
	require.NoError(t, err)
	var out []string
	for _, c := range calllog.Filter(calls, verb) {
		out = append(out, c.OwnNetNS)
	}
	return out
}

// A face created on a thread locked in another network namespace, as
// BuildKit creates it inside RootlessKit's detached one, runs every plugin
// there, whatever goroutine calls: the bridge and the host end of the veth
// are made in that namespace, not on the host, and the DEL retries of a
// teardown that failed, which run in the background, run there too and
// release the reservation once the fault clears.
func TestRealFaceCreatedInDetachedNetNS(t *testing.T) {
	d := newDetachedNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c cni.CNI
	require.NoError(t, netns.Do(d.detached, func() error {
		var err error
		c, err = cni.New(cni.WithPluginDir([]string{pluginDir}), cni.WithConfListBytes(d.conf),
			cni.WithEngineOptions(ocicni.WithCacheDir(t.TempDir()),
				ocicni.WithHealing(ocicni.HealPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, StartDelay: time.Millisecond})))
		return err
	}))
	t.Cleanup(func() { assert.NoError(t, c.(*cni.Face).Shutdown()) })

	pod := testenv.NewNS(t)
	res, err := c.Setup(ctx, "detached-pod", pod) // from the test's goroutine, on the host
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	host, detached := d.bridgeIn(t)
	assert.False(t, host, "no bridge on the host")
	assert.True(t, detached, "the bridge is in the detached namespace")
	assert.Len(t, testenv.Reservations(t, d.dataDir, "detached"), 1)

	testenv.WriteFile(t, filepath.Dir(d.fault), filepath.Base(d.fault), "")
	require.Error(t, c.Remove(ctx, "detached-pod", pod), "the recorder fails DEL")
	require.NoError(t, os.Remove(d.fault))
	require.Eventually(t, func() bool {
		return len(testenv.Reservations(t, d.dataDir, "detached")) == 0
	}, time.Minute, 10*time.Millisecond, "a background retry releases the reservation")
	require.Empty(t, testenv.Reservations(t, d.dataDir, "detached"))

	adds, dels := d.ownNetNSes(t, "ADD"), d.ownNetNSes(t, "DEL")
	assert.Equal(t, []string{d.detachedName}, adds)
	require.GreaterOrEqual(t, len(dels), 2, "the failed DEL and its retry")
	t.Logf("DELs ran in %v", dels)
	for _, ns := range dels {
		assert.Equal(t, d.detachedName, ns, "every DEL ran in the detached namespace")
	}
}

// SetupSerially called from a goroutine locked in another network
// namespace, as BuildKit calls it there with a face created on the host,
// runs its ADDs in that namespace, as go-cni's does; Remove from the same
// goroutine cleans up.
func TestRealSetupSeriallyFromDetachedNetNS(t *testing.T) {
	d := newDetachedNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cni.New(cni.WithPluginDir([]string{pluginDir}), cni.WithConfListBytes(d.conf),
		cni.WithEngineOptions(ocicni.WithCacheDir(t.TempDir()), ocicni.WithoutHealing()))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.(*cni.Face).Shutdown()) })

	pod := testenv.NewNS(t)
	require.NoError(t, netns.Do(d.detached, func() error {
		res, err := c.SetupSerially(ctx, "detached-serial", pod)
		if err == nil && len(res.Interfaces["eth0"].IPConfigs) == 0 {
			t.Error("no eth0 address in the result")
		}
		return err
	}))
	host, detached := d.bridgeIn(t)
	assert.False(t, host, "no bridge on the host")
	assert.True(t, detached, "the bridge is in the detached namespace")
	assert.Equal(t, []string{d.detachedName}, d.ownNetNSes(t, "ADD"))
	require.NoError(t, netns.Do(d.detached, func() error { return c.Remove(ctx, "detached-serial", pod) }))
	assert.Empty(t, testenv.Reservations(t, d.dataDir, "detached"))
	assert.Equal(t, []string{d.detachedName}, d.ownNetNSes(t, "DEL"))
}
