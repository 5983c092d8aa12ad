package ocicnitest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

func TestConflist(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plugins []string
		want    string
	}{
		{
			"types",
			[]string{"bridge", "portmap"},
			`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"},{"type":"portmap"}]}`,
		},
		{
			"verbatim plugin",
			[]string{"bridge", `{"type":"portmap","capabilities":{"portMappings":true}}`},
			`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ocicnitest.Conflist("net", "1.0.0", tc.plugins...)
			assert.JSONEq(t, tc.want, string(b))
			list, err := libcni.NetworkConfFromBytes(b)
			require.NoError(t, err)
			assert.Len(t, list.Plugins, len(tc.plugins))
		})
	}
}

func TestWriteConflist(t *testing.T) {
	dir := t.TempDir()
	write := func(name, version string) string {
		p, err := ocicnitest.WriteConflist(dir, name, version, "bridge")
		require.NoError(t, err)
		return filepath.Base(p)
	}
	assert.Equal(t, "10-zeta.conflist", write("zeta", "1.0.0"))
	assert.Equal(t, "11-alpha.conflist", write("alpha", "1.0.0"))
	assert.Equal(t, "10-zeta.conflist", write("zeta", "1.1.0"), "rewritten in place")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "42-hand.conflist"), ocicnitest.Conflist("hand", "1.0.0", "bridge"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), nil, 0o644))
	assert.Equal(t, "43-beta.conflist", write("beta", "1.0.0"))

	data, err := os.ReadFile(filepath.Join(dir, "10-zeta.conflist"))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"cniVersion":"1.1.0"`)

	for _, bad := range []string{"", "a/b", "../x"} {
		_, err := ocicnitest.WriteConflist(dir, bad, "1.0.0", "bridge")
		require.Error(t, err, "%q", bad)
	}

	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "zeta", "1.0.0", "bridge")
	env.WriteConflist(t, "alpha", "1.0.0", "bridge")
	m := env.NewManager(t)
	assert.Equal(t, "zeta", m.GetDefaultNetworkName(), "the first written is the default")
	assert.ElementsMatch(t, []string{"zeta", "alpha"}, networkNames(m))
}

func networkNames(m *ocicni.Manager) []string {
	var out []string
	for _, s := range m.NetworkStatuses(context.Background()) {
		out = append(out, s.Network)
	}
	return out
}

// An entry written by WriteCacheEntry is what libcni writes, and
// package cache reads it back field for field.
func TestWriteCacheEntry(t *testing.T) {
	dir := t.TempDir()
	p, err := ocicnitest.WriteCacheEntry(dir, ocicnitest.CacheEntry{
		Network: "net", ContainerID: "ctr", IfName: "net1", NetNS: "/run/netns/ctr",
		PluginTypes: []string{"bridge", "portmap"}, CNIVersion: "0.4.0",
		Args: map[string]string{"K8S_POD_NAME": "web", "IgnoreUnknown": "1"},
	})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "results", "net-ctr-net1"), p)

	e, err := cache.New(dir).Get("net", "ctr", "net1")
	require.NoError(t, err)
	assert.Equal(t, p, e.Path)
	assert.Equal(t, "/run/netns/ctr", e.NetNS)
	assert.Equal(t, [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAME", "web"}}, e.CNIArgs)
	assert.JSONEq(t, string(ocicnitest.Conflist("net", "0.4.0", "bridge", "portmap")), string(e.Config))
	res, err := e.Result()
	require.NoError(t, err)
	assert.Equal(t, "0.4.0", res.Version())
	iface, ips, err := ocicni.SandboxIPs(ocicni.NetResult{Result: res, NetAttachment: ocicni.NetAttachment{Name: "net", Ifname: "net1"}})
	require.NoError(t, err)
	assert.Equal(t, "net1", iface.Name)
	assert.Equal(t, "10.88.0.2/16", ips[0].Address.String())

	var raw map[string]any
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &raw))
	assert.Equal(t, libcni.CNICacheV1, raw["kind"])

	t.Run("given result and config", func(t *testing.T) {
		const result = `{"cniVersion":"1.0.0","ips":[{"address":"198.51.100.4/24"}]}`
		p, err := ocicnitest.WriteCacheEntry(dir, ocicnitest.CacheEntry{
			Network: "other", ContainerID: "ctr", Config: ocicnitest.Conflist("other", "1.0.0", "macvlan"), Result: result,
		})
		require.NoError(t, err)
		assert.Equal(t, "other-ctr-eth0", filepath.Base(p))
		e, err := cache.New(dir).Get("other", "ctr", "eth0")
		require.NoError(t, err)
		assert.JSONEq(t, result, string(e.RawResult))
	})

	for name, bad := range map[string]ocicnitest.CacheEntry{
		"no network":        {ContainerID: "ctr"},
		"no container":      {Network: "net"},
		"bad ifname":        {Network: "net", ContainerID: "ctr", IfName: "a/b"},
		"config misnamed":   {Network: "net", ContainerID: "ctr", Config: ocicnitest.Conflist("else", "1.0.0", "bridge")},
		"config not JSON":   {Network: "net", ContainerID: "ctr", Config: []byte("{")},
		"result not JSON":   {Network: "net", ContainerID: "ctr", Result: "nope"},
		"hostile network":   {Network: "../x", ContainerID: "ctr"},
		"hostile container": {Network: "net", ContainerID: "../../x"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ocicnitest.WriteCacheEntry(dir, bad)
			require.Error(t, err)
		})
	}
}

// Teardown by ID finds the entries written by WriteCacheEntry and the
// attachments of an order record, and deletes them in the recorded order.
func TestTeardownFromWrittenCache(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	ns := env.NetNS(t, "ctr")
	env.WriteCacheEntry(t, ocicnitest.CacheEntry{
		Network: "podnet", ContainerID: "ctr", NetNS: ns,
		Args: map[string]string{"K8S_POD_NAME": "web"},
	})
	// "gone" was removed from the conf dir: its DEL uses the cached config.
	env.WriteCacheEntry(t, ocicnitest.CacheEntry{
		Network: "gone", ContainerID: "ctr", IfName: "net1", NetNS: ns,
		PluginTypes: []string{"macvlan"},
	})
	// "half" never reached the cache: the record alone remembers it.
	env.WriteConflist(t, "half", "1.0.0", "ipvlan")
	env.WriteOrder(t, "ctr",
		cache.Attachment{Network: "podnet", IfName: "eth0", NetNS: ns},
		cache.Attachment{Network: "gone", IfName: "net1", NetNS: ns},
		cache.Attachment{Network: "half", IfName: "net2", NetNS: ns})
	m := env.NewManager(t)

	require.NoError(t, m.TearDownPodWithContext(context.Background(), ocicni.PodNetwork{ID: "ctr"}))
	assert.Equal(t, []brief{
		{"DEL", "half", "ipvlan", "net2", "ctr", ""},
		{"DEL", "gone", "macvlan", "net1", "ctr", ""},
		// The cached config's plugin type, not the loaded config's.
		{"DEL", "podnet", ocicnitest.DefaultPluginType, "eth0", "ctr", "web"},
	}, briefs(env.Exec.Calls()))
	listing, err := cache.New(env.CacheDir).ForContainer("ctr")
	require.NoError(t, err)
	assert.Empty(t, listing.Entries)
	order, err := cache.New(env.CacheDir).ReadOrder("ctr")
	require.NoError(t, err)
	assert.Nil(t, order)
}

func TestNewNetNS(t *testing.T) {
	dir := t.TempDir()
	p, err := ocicnitest.NewNetNS(dir, "pod")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "pod"), p)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	p2, err := ocicnitest.NewNetNS(dir, "pod")
	require.NoError(t, err, "again is fine")
	assert.Equal(t, p, p2)

	for _, bad := range []string{"", ".", "..", "a/b"} {
		_, err := ocicnitest.NewNetNS(dir, bad)
		require.Error(t, err, "%q", bad)
	}
}
