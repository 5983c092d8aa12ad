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
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// validAttachmentsOf returns what each GC verb received as
// cni.dev/valid-attachments, by network.
func validAttachmentsOf(t *testing.T, fx *fakecni.Exec) map[string][]types.GCAttachment {
	t.Helper()
	out := map[string][]types.GCAttachment{}
	for _, c := range fx.Calls("GC") {
		valid := c.ValidAttachments()
		require.NotNil(t, valid, "GC of %s carries the valid attachments", c.Network)
		out[c.Network] = valid
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
	fx := fakecni.New()
	fx.OnlyPlugins("fake")
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
	for _, c := range fx.Calls() {
		assert.Equal(t, "GC", c.Verb, "no DEL for valid pods")
	}
}
