package ocicni

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// benchEnv holds one bridge network used by both the manager and raw
// libcni, so that both run the same plugins on the same config.
type benchEnv struct {
	confDir, cacheDir string
	list              *libcni.NetworkConfigList
	m                 *Manager
	raw               *libcni.CNIConfig
}

func newBenchEnv(b *testing.B, networks int) *benchEnv {
	b.Helper()
	testenv.RequireRoot(b)
	dir := b.TempDir()
	e := &benchEnv{confDir: filepath.Join(dir, "net.d"), cacheDir: filepath.Join(dir, "cache")}
	require.NoError(b, os.MkdirAll(e.confDir, 0o755))
	for i := range networks {
		n := testenv.Alloc(b)
		conf := testenv.BridgeConflist(fmt.Sprintf("bench%d", i), "1.0.0", n, filepath.Join(dir, "ipam"))
		testenv.WriteFile(b, e.confDir, fmt.Sprintf("%02d.conflist", i), conf)
		if i == 0 {
			l, err := libcni.NetworkConfFromBytes([]byte(conf))
			require.NoError(b, err)
			e.list = l
		}
	}
	e.m = newQuietManager(b, e.confDir, e.cacheDir)
	e.raw = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, filepath.Join(dir, "rawcache"), nil)
	return e
}

// newQuietManager returns a manager without a watcher that logs only
// warnings and errors, as a benchmark wants: logging at Info level is the
// runtime's choice, not part of the path measured.
func newQuietManager(b *testing.B, confDir, cacheDir string) *Manager {
	b.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := New(WithConfDir(confDir), WithBinDirs(pluginDir), WithCacheDir(cacheDir),
		WithoutWatcher(), WithLogger(logrus.NewEntry(logger)))
	require.NoError(b, err)
	b.Cleanup(func() { _ = m.Shutdown() })
	return m
}
