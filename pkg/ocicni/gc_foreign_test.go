//go:build !nogctests

package ocicni

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// foreignAttachment is a container that another runtime attached with
// libcni alone, as podman's CNI backend does: no order record, and a
// network whose config is not in the manager's conf dir.
type foreignAttachment struct {
	network, dataDir string
	netns, ip        string
	entry            string // its libcni cache entry
}

// attachForeign attaches a new netns to a bridge+host-local network of
// its own (config, bridge, subnet and host-local data dir) with raw
// libcni, keeping libcni's cache in cacheDir, and registers its DEL.
func attachForeign(t *testing.T, cacheDir string) *foreignAttachment {
	t.Helper()
	dir := t.TempDir()
	f := &foreignAttachment{network: "foreign", dataDir: filepath.Join(dir, "ipam"), netns: testenv.NewNS(t)}
	confFile := testenv.WriteFile(t, dir, "foreign.conflist", testenv.BridgeConflist(f.network, "1.1.0", testenv.Alloc(t), f.dataDir))
	list, err := libcni.ConfListFromFile(confFile)
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, cacheDir, nil)
	id := "foreign-" + randHex(t)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: f.netns, IfName: "eth0"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cni.AddNetworkList(ctx, list, rt)
	require.NoError(t, err)
	t.Cleanup(func() { // before the netns goes; idempotent after a GC's DEL
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, cni.DelNetworkList(ctx, list, rt), "the other runtime's DEL")
	})
	r, err := types100.NewResultFromResult(res)
	require.NoError(t, err)
	require.NotEmpty(t, r.IPs)
	f.ip = r.IPs[0].Address.IP.String()
	name, err := cache.FileName(f.network, id, "eth0")
	require.NoError(t, err)
	f.entry = filepath.Join(cache.New(cacheDir).ResultsDir(), name)
	return f
}

// assertAttached checks that everything of f is in place: its cache
// entry, its host-local reservation file and its address in its netns.
func (f *foreignAttachment) assertAttached(t *testing.T) {
	t.Helper()
	assert.FileExists(t, f.entry, "the other runtime's cache entry")
	assert.FileExists(t, filepath.Join(f.dataDir, f.network, f.ip), "the other runtime's host-local reservation")
	assert.Equal(t, []string{f.ip + "/24"}, testenv.AddrsIn(t, f.netns, "eth0"), "the other runtime's address")
}

// assertDetached checks that nothing of f is left.
func (f *foreignAttachment) assertDetached(t *testing.T) {
	t.Helper()
	assert.NoFileExists(t, f.entry, "the other runtime's cache entry")
	assert.NoFileExists(t, filepath.Join(f.dataDir, f.network, f.ip), "the other runtime's host-local reservation")
	assert.Nil(t, testenv.AddrsIn(t, f.netns, "eth0"), "the other runtime's eth0")
}

// TestRealGCLeavesAnotherRuntimesAttachment is a node where another
// runtime (podman's CNI backend, raw libcni) shares the manager's cache
// dir: it attached a container to a bridge network of its own, whose
// config is not in the manager's conf dir. The manager, made as CRI-O
// makes it (InitCNIWithCache) or with New's default options, sets up a
// pod of its own and runs GC with that pod valid: the other container
// keeps its cache entry, its reservation and its address, and the
// manager's pod is intact. With WithGCAllNetworks, GC deletes the other
// runtime's attachment too.
func TestRealGCLeavesAnotherRuntimesAttachment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		make        func(confDir, cacheDir string) (CNIPlugin, error)
		foreignKept bool
	}{
		{
			name: "InitCNIWithCache",
			make: func(confDir, cacheDir string) (CNIPlugin, error) {
				return InitCNIWithCache("ours", confDir, cacheDir, pluginDir)
			},
			foreignKept: true,
		},
		{
			name: "New with default options",
			make: func(confDir, cacheDir string) (CNIPlugin, error) {
				return New(WithConfDir(confDir), WithCacheDir(cacheDir), WithBinDirs(pluginDir))
			},
			foreignKept: true,
		},
		{
			name: "New WithGCAllNetworks",
			make: func(confDir, cacheDir string) (CNIPlugin, error) {
				return New(WithConfDir(confDir), WithCacheDir(cacheDir), WithBinDirs(pluginDir), WithGCAllNetworks())
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			foreign := attachForeign(t, e.cacheDir)
			e.addConf("ours", testenv.BridgeConflist("ours", "1.1.0", testenv.Alloc(t), e.dataDir))
			m, err := tc.make(e.confDir, e.cacheDir)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, m.Shutdown()) })
			pod := e.pod("ours")
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, m.TearDownPodWithContext(context.Background(), pod)) })
			require.Len(t, res, 1)
			ours := resultIPs(t, res[0])
			require.Len(t, ours, 1)

			require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&pod}))

			if tc.foreignKept {
				foreign.assertAttached(t)
			} else {
				foreign.assertDetached(t)
			}
			assert.Equal(t, ours, testenv.AddrsIn(t, pod.NetNS, "eth0"), "our pod keeps its address")
			assert.Equal(t, []string{reservation(t, ours[0])}, testenv.Reservations(t, e.dataDir, "ours"), "our pod keeps its reservation")
			name, err := cache.FileName("ours", pod.ID, "eth0")
			require.NoError(t, err)
			assert.FileExists(t, filepath.Join(cache.New(e.cacheDir).ResultsDir(), name), "our pod keeps its cache entry")
			order, err := cache.New(e.cacheDir).ReadOrder(pod.ID)
			require.NoError(t, err)
			assert.Len(t, order, 1, "our pod keeps its order record")
		})
	}
}
