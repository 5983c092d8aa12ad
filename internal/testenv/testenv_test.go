package testenv

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pluginDir holds the plugins built by TestMain when running as root.
var pluginDir string

func TestMain(m *testing.M) {
	os.Exit(MainWithPlugins(m, &pluginDir))
}

func TestBuildPlugins(t *testing.T) {
	RequireRoot(t)
	require.NotEmpty(t, pluginDir)
	for _, name := range append(append([]string{}, ReferencePlugins...), Recorder) {
		st, err := os.Stat(filepath.Join(pluginDir, name))
		if assert.NoError(t, err, name) {
			assert.NotZero(t, st.Mode()&0o111, "%s is not executable", name)
		}
	}

	// A prebuilt $OCICNI_TEST_PLUGIN_DIR would be returned as is; this test
	// is about building.
	t.Setenv(PluginDirEnv, "")
	start := time.Now()
	dir, err := BuildPlugins()
	require.NoError(t, err)
	t.Logf("warm BuildPlugins: %v", time.Since(start))
	assert.NotEqual(t, pluginDir, dir, "each build gets a fresh directory")
	require.NoError(t, RemovePlugins(dir))
	assert.NoDirExists(t, dir)
}

func TestBuildPluginsUsesPrebuiltDir(t *testing.T) {
	RequireRoot(t)
	t.Setenv(PluginDirEnv, pluginDir)
	dir, err := BuildPlugins()
	require.NoError(t, err)
	assert.Equal(t, pluginDir, dir)
	require.NoError(t, RemovePlugins(dir))
	assert.DirExists(t, pluginDir, "the prebuilt directory is never removed")
}

func TestAllocIsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		n := Alloc(t)
		assert.LessOrEqual(t, len(n.Bridge), 15, "bridge name %q too long", n.Bridge)
		_, subnet, err := net.ParseCIDR(n.Subnet)
		require.NoError(t, err)
		assert.True(t, subnet.Contains(net.ParseIP(n.Gateway)))
		assert.True(t, subnet.Contains(net.ParseIP(n.RangeStart)))
		assert.True(t, subnet.Contains(net.ParseIP(n.RangeEnd)))
		for _, key := range []string{n.Bridge, n.Subnet} {
			assert.False(t, seen[key], "%s handed out twice", key)
			seen[key] = true
		}
	}
}

func TestNetFor(t *testing.T) {
	tests := []struct {
		n              int
		bridge, subnet string
		gateway        string
	}{
		{0, "ocit0", "10.200.0.0/24", "10.200.0.1"},
		{249, "ocit249", "10.200.249.0/24", "10.200.249.1"},
		{250, "ocit250", "10.201.0.0/24", "10.201.0.1"},
		{netSlots - 1, "ocit12499", "10.249.249.0/24", "10.249.249.1"},
	}
	for _, tt := range tests {
		got := netFor(tt.n)
		assert.Equal(t, tt.bridge, got.Bridge)
		assert.Equal(t, tt.subnet, got.Subnet)
		assert.Equal(t, tt.gateway, got.Gateway)
	}
}

func TestConfigsParse(t *testing.T) {
	n := netFor(7)
	rec := RecorderConf("ignored", "1.0.0", "/tmp/calls.jsonl", map[string]any{
		"add": map[string]any{"errorCode": 7},
	})
	list, err := libcni.ConfListFromBytes([]byte(BridgeConflist("net1", "1.0.0", n, "/tmp/data", rec)))
	require.NoError(t, err)
	assert.Equal(t, "net1", list.Name)
	require.Len(t, list.Plugins, 2)
	assert.Equal(t, "bridge", list.Plugins[0].Network.Type)
	assert.Equal(t, "host-local", list.Plugins[0].Network.IPAM.Type)
	assert.Equal(t, Recorder, list.Plugins[1].Network.Type)

	conf, err := libcni.NetworkPluginConfFromBytes([]byte(rec))
	require.NoError(t, err)
	assert.Equal(t, Recorder, conf.Network.Type)
	assert.Contains(t, string(conf.Bytes), `"logFile"`)

	assert.Panics(t, func() { Conflist("x", "1.0.0", "{not json") })
}

func TestReservations(t *testing.T) {
	dataDir := t.TempDir()
	assert.Nil(t, Reservations(t, dataDir, "net1"))

	dir := filepath.Join(dataDir, "net1")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for _, name := range []string{"10.0.0.3", "10.0.0.2", "fd00::5", "lock", "last_reserved_ip.0"} {
		WriteFile(t, dir, name, "ctr\neth0")
	}
	assert.Equal(t, []string{"10.0.0.2", "10.0.0.3", "fd00::5"}, Reservations(t, dataDir, "net1"))
}
