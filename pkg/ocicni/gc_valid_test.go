package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// validAttachmentsOf returns what each GC verb received as
// cni.dev/valid-attachments, by network.
func validAttachmentsOf(t *testing.T, fx *fakeExec) map[string][]types.GCAttachment {
	t.Helper()
	out := map[string][]types.GCAttachment{}
	for _, c := range fx.plugged() {
		if c.env["CNI_COMMAND"] != "GC" {
			continue
		}
		name, _ := c.stdin["name"].(string)
		list, ok := c.stdin["cni.dev/valid-attachments"].([]any)
		require.True(t, ok, "GC of %s carries the valid attachments", name)
		out[name] = []types.GCAttachment{}
		for _, a := range list {
			m := a.(map[string]any)
			out[name] = append(out[name], types.GCAttachment{ContainerID: m["containerID"].(string), IfName: m["ifname"].(string)})
		}
	}
	return out
}

// A valid pod's attachments are the union of the networks it names, its
// cache entries, its order record and, when it names none, the default
// network on eth0. Checked on the GC verb's stdin, without root.
func TestGCValidAttachmentsUnion(t *testing.T) {
	root := t.TempDir()
	confDir, binDir, cacheDir := filepath.Join(root, "net.d"), filepath.Join(root, "bin"), filepath.Join(root, "cache")
	for _, d := range []string{confDir, binDir} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	for _, n := range []string{"neta", "netb", "netc"} {
		writeConf(t, confDir, "10-"+n+".conflist", `{"cniVersion":"1.1.0","name":"`+n+`","plugins":[{"type":"fake"}]}`)
	}
	c := cache.New(cacheDir)
	require.NoError(t, c.WriteOrder("recorded", []cache.Attachment{{Network: "netc", IfName: "net1"}}))
	fx := newPodExec()
	logger, _ := test.NewNullLogger()
	m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(cacheDir), WithoutWatcher(),
		WithExec(fx), WithLogger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	require.Equal(t, "neta", m.GetDefaultNetworkName())

	require.NoError(t, m.GC(context.Background(), []*PodNetwork{
		{ID: "recorded"}, // no cache entry, a record, no networks named
		{ID: "named", Networks: []NetAttachment{{Name: "netb", Ifname: "x0"}}},
	}))

	assert.Equal(t, map[string][]types.GCAttachment{
		"neta": {{ContainerID: "recorded", IfName: "eth0"}},
		"netb": {{ContainerID: "named", IfName: "x0"}},
		"netc": {{ContainerID: "recorded", IfName: "net1"}},
	}, validAttachmentsOf(t, fx))
	for _, c := range fx.plugged() {
		assert.Equal(t, "GC", c.env["CNI_COMMAND"], "no DEL for valid pods")
	}
}
