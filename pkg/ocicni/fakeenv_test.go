package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// fakeEnv is a conf dir holding one 1.0.0 network, "net", of the plugin
// "fake", a cache dir and a netns path (a plain file: the fake executor
// enters nothing), for the internal tests that run without root.
type fakeEnv struct {
	confDir, binDir, cacheDir, nsPath string
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	root := t.TempDir()
	e := &fakeEnv{
		confDir: filepath.Join(root, "net.d"), binDir: filepath.Join(root, "bin"),
		cacheDir: filepath.Join(root, "cache"), nsPath: filepath.Join(root, "ns"),
	}
	require.NoError(t, os.MkdirAll(e.confDir, 0o700))
	writeConf(t, e.confDir, "10-net.conflist", conflist("net", "1.0.0", "fake"))
	require.NoError(t, os.WriteFile(e.nsPath, nil, 0o600))
	return e
}

// manager starts a manager on the env's dirs, without a watcher, whose
// plugins and netns operations are a new fake executor's (opts come last,
// so WithNetNSOps replaces the latter), and shuts it down with the test.
func (e *fakeEnv) manager(t *testing.T, opts ...Option) (*Manager, *fakecni.Exec) {
	t.Helper()
	fx := fakecni.New()
	fx.OnlyPlugins("fake")
	logger, _ := test.NewNullLogger()
	base := []Option{
		WithConfDir(e.confDir), WithBinDirs(e.binDir), WithCacheDir(e.cacheDir), WithoutWatcher(),
		WithExec(fx), WithNetNSOps(fx), WithLogger(logrus.NewEntry(logger)),
	}
	m, err := New(append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	return m, fx
}
