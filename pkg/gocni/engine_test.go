package cni_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// The engine loads exactly the networks of the face's last load, from
// memory: never the other files of the conf dir, and the face writes no
// file anywhere, neither in the temp dir nor in the conf dir.
func TestEngineGetsTheLoadedNetworksInMemory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a", "b", "c")
	confFiles := func() []string {
		des, err := os.ReadDir(env.ConfDir)
		require.NoError(t, err)
		var out []string
		for _, de := range des {
			out = append(out, de.Name())
		}
		return out
	}
	before := confFiles()

	f := newFace(t, env, cni.WithMinNetworkCount(2), cni.WithLoNetwork, cni.WithDefaultConf)
	assert.Equal(t, []string{"a"}, f.Engine().Networks(), "WithPluginMaxConfNum's default: the first file")
	assert.Equal(t, "a", f.Engine().GetDefaultNetworkName())

	require.NoError(t, f.Load(cni.WithLoNetwork, cni.WithAllConf))
	assert.Equal(t, []string{"a", "b", "c"}, f.Engine().Networks())

	require.NoError(t, f.Load(
		cni.WithConfListBytes(ocicnitest.Conflist("y", "1.0.0", "bridge")),
		cni.WithConfListBytes(ocicnitest.Conflist("x", "1.0.0", "bridge")),
	))
	assert.Equal(t, []string{"x", "y"}, f.Engine().Networks())
	assert.Equal(t, "y", f.Engine().GetDefaultNetworkName(), "load order, not name order")
	_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD y eth0", "ADD x eth1"}, calls(env, "ADD"))
	require.NoError(t, f.Remove(context.Background(), "pod1", env.NetNS(t, "pod1")))

	require.NoError(t, f.Shutdown())
	des, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, des, "the face wrote nothing to the temp dir")
	assert.Equal(t, before, confFiles(), "the face wrote nothing to the conf dir")
}

// Files given by path reach the engine as the face parsed them: a conf
// list file with the plugins of its sub-folder (as libcni reads it), and
// a single-plugin file.
func TestEngineGetsFilesAsParsed(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	dir := t.TempDir()
	list := filepath.Join(dir, "10-l.conflist")
	require.NoError(t, os.WriteFile(list, ocicnitest.Conflist("l", "1.0.0", "bridge"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "l"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "l", "10-extra.conf"), []byte(`{"type":"tuning"}`), 0o600))
	single := filepath.Join(dir, "20-s.conf")
	require.NoError(t, os.WriteFile(single, []byte(`{"cniVersion":"1.0.0","name":"s","type":"bridge"}`), 0o600))

	f := newFace(t, env, cni.WithConfListFile(list))
	require.NoError(t, f.Load(cni.WithConfFile(single), cni.WithConfListFile(list)))
	require.Equal(t, []string{"l", "s"}, f.Engine().Networks())
	_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	require.NoError(t, err)
	var got []string
	for _, c := range env.Exec.Calls("ADD") {
		got = append(got, c.Network+"/"+c.PluginType+" "+c.IfName)
	}
	// WithConfFile always takes prefix+0, WithConfListFile numbers by the
	// networks before it, as go-cni's do.
	assert.Equal(t, []string{"s/bridge eth0", "l/bridge eth1", "l/tuning eth1"}, got)
}

// A network that the engine cannot use (here its plugin is missing) is
// named in the engine's error by its index in GetConfig().Networks.
func TestEngineNamesAMissingNetworkByItsIndex(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.Exec.OnlyPlugins("bridge")
	f := newFace(t, env, cni.WithLoNetwork,
		cni.WithConfListBytes(ocicnitest.Conflist("good", "1.0.0", "bridge")),
		cni.WithConfListBytes(ocicnitest.Conflist("bad", "1.0.0", "nosuchplugin")))
	require.Len(t, f.GetConfig().Networks, 3)
	assert.Equal(t, []string{"good"}, f.Engine().Networks())
	skipped := f.Engine().Skipped()
	require.Len(t, skipped, 1)
	assert.Equal(t, "networks[2]", skipped[0].File)
	require.ErrorIs(t, skipped[0], ocicni.ErrPluginNotFound)

	_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	var nf *ocicni.NetworkNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "bad", nf.Network)
	assert.Empty(t, env.Exec.Calls("ADD"), "the setup failed before any ADD")
}
