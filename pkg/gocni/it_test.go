package cni_test

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// pluginDir holds the reference plugins when the tests run as root.
var pluginDir string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithPlugins(m, &pluginDir))
}

// TestRealBridgeLifecycle runs containerd's sequence with the reference
// bridge and host-local plugins in real namespaces: setup gives an IP
// inside the netns; with the conf file moved away and Load failing, Remove
// still releases the reservation from the cache; with the file moved back,
// Setup recovers without a Load.
func TestRealBridgeLifecycle(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := testenv.Alloc(t)
	dataDir, confDir, cacheDir := t.TempDir(), t.TempDir(), t.TempDir()
	path := testenv.WriteFile(t, confDir, "10-podnet.conflist", testenv.BridgeConflist("podnet", "1.0.0", n, dataDir))
	c, err := cni.New(
		cni.WithMinNetworkCount(2),
		cni.WithPluginConfDir(confDir),
		cni.WithPluginMaxConfNum(1),
		cni.WithPluginDir([]string{pluginDir}),
		cni.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing()),
	)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	require.NoError(t, c.Load(cni.WithLoNetwork, cni.WithDefaultConf))
	require.NoError(t, c.Status())
	_, subnet, err := net.ParseCIDR(n.Subnet)
	require.NoError(t, err)

	ns1 := testenv.NewNS(t)
	res, err := c.Setup(ctx, "gocni-pod1", ns1, cni.WithLabels(map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAME": "web"}))
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	ip := res.Interfaces["eth0"].IPConfigs[0].IP
	assert.True(t, subnet.Contains(ip), "%s in %s", ip, n.Subnet)
	assert.Equal(t, []string{ip.String() + "/24"}, testenv.AddrsIn(t, ns1, "eth0"), "the IP is in the netns")
	assert.Contains(t, testenv.AddrsIn(t, ns1, "lo"), "127.0.0.1/8", "lo is up")
	assert.Equal(t, []string{ip.String()}, testenv.Reservations(t, dataDir, "podnet"))

	// The conf file goes away; containerd's syncer calls Load, which fails.
	require.NoError(t, os.Rename(path, path+".away"))
	require.Error(t, c.Load(cni.WithLoNetwork, cni.WithDefaultConf))
	require.ErrorIs(t, c.Status(), cni.ErrCNINotInitialized)
	require.NoError(t, c.Remove(ctx, "gocni-pod1", ns1), "Remove works from the cache")
	assert.Empty(t, testenv.Reservations(t, dataDir, "podnet"), "the reservation is released")

	// The file comes back and nobody calls Load: Setup recovers.
	require.NoError(t, os.Rename(path+".away", path))
	ns2 := testenv.NewNS(t)
	res, err = c.Setup(ctx, "gocni-pod2", ns2)
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	assert.Len(t, testenv.Reservations(t, dataDir, "podnet"), 1)
	require.NoError(t, c.Remove(ctx, "gocni-pod2", ns2))
	assert.Empty(t, testenv.Reservations(t, dataDir, "podnet"))
}

// containerd's Setup repeated for one sandbox (a retry, or two callers
// racing) gets the engine's rule: the identical repeat returns the first
// result and runs no ADD, so no rollback takes eth0's IP; a repeat with
// other labels (other CNI_ARGS) is refused with ocicni.ErrAttachmentLive
// before any plugin runs. Remove then releases everything.
func TestRealBridgeRepeatedSetup(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := testenv.Alloc(t)
	dataDir, confDir, cacheDir := t.TempDir(), t.TempDir(), t.TempDir()
	testenv.WriteFile(t, confDir, "10-podnet.conflist", testenv.BridgeConflist("podnet", "1.0.0", n, dataDir))
	var adds atomic.Int32
	c, err := cni.New(
		cni.WithMinNetworkCount(2),
		cni.WithPluginConfDir(confDir),
		cni.WithPluginDir([]string{pluginDir}),
		cni.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing(),
			ocicni.WithPluginHook(func(_ context.Context, r ocicni.PluginRun) {
				if r.Verb == "ADD" {
					adds.Add(1)
				}
			})),
	)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	require.NoError(t, c.Load(cni.WithLoNetwork, cni.WithDefaultConf))
	ns := testenv.NewNS(t)
	labels := cni.WithLabels(map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAME": "web"})

	first, err := c.Setup(ctx, "gocni-repeat", ns, labels)
	require.NoError(t, err)
	require.NotEmpty(t, first.Interfaces["eth0"].IPConfigs)
	ip := first.Interfaces["eth0"].IPConfigs[0].IP
	ran := adds.Load()

	again, err := c.Setup(ctx, "gocni-repeat", ns, labels)
	require.NoError(t, err, "the identical repeat succeeds")
	require.NotEmpty(t, again.Interfaces["eth0"].IPConfigs)
	assert.Equal(t, ip, again.Interfaces["eth0"].IPConfigs[0].IP, "the repeat returns the first result")
	assert.Equal(t, ran, adds.Load(), "the repeat ran no ADD")
	assert.Equal(t, []string{ip.String() + "/24"}, testenv.AddrsIn(t, ns, "eth0"), "eth0 keeps its IP")
	assert.Equal(t, []string{ip.String()}, testenv.Reservations(t, dataDir, "podnet"))

	_, err = c.Setup(ctx, "gocni-repeat", ns, cni.WithLabels(map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAME": "db"}))
	require.ErrorIs(t, err, ocicni.ErrAttachmentLive)
	assert.Equal(t, ran, adds.Load(), "the refused setup ran no ADD")
	assert.Equal(t, []string{ip.String() + "/24"}, testenv.AddrsIn(t, ns, "eth0"), "eth0 keeps its IP")

	require.NoError(t, c.Remove(ctx, "gocni-repeat", ns))
	assert.Empty(t, testenv.Reservations(t, dataDir, "podnet"))
	assert.Nil(t, testenv.AddrsIn(t, ns, "eth0"), "eth0 is gone")
}

// A static IP given with WithArgs("IP", ...), as go-cni callers pass it,
// reaches host-local through CNI_ARGS: eth0 gets that address, host-local
// reserves it, and Remove releases it.
func TestRealStaticIPThroughArgs(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := testenv.Alloc(t)
	dataDir, cacheDir := t.TempDir(), t.TempDir()
	_, subnet, err := net.ParseCIDR(n.Subnet)
	require.NoError(t, err)
	base := subnet.IP.To4()
	static := net.IPv4(base[0], base[1], base[2], 77)
	c, err := cni.New(
		cni.WithPluginDir([]string{pluginDir}),
		cni.WithConfListBytes([]byte(testenv.BridgeConflist("podnet", "1.0.0", n, dataDir))),
		cni.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing()),
	)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	ns := testenv.NewNS(t)
	opts := []cni.NamespaceOpts{cni.WithArgs("IgnoreUnknown", "1"), cni.WithArgs("IP", static.String())}

	res, err := c.Setup(ctx, "gocni-static", ns, opts...)
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	assert.Equal(t, static.String(), res.Interfaces["eth0"].IPConfigs[0].IP.String())
	assert.Equal(t, []string{static.String() + "/24"}, testenv.AddrsIn(t, ns, "eth0"))
	assert.Equal(t, []string{static.String()}, testenv.Reservations(t, dataDir, "podnet"))

	require.NoError(t, c.Remove(ctx, "gocni-static", ns, opts...))
	assert.Empty(t, testenv.Reservations(t, dataDir, "podnet"))
}
