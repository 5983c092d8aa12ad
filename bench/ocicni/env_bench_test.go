package ocicni_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// benchEnv holds one bridge network used by both the manager and raw
// libcni, so that both run the same plugins on the same config.
type benchEnv struct {
	confDir, cacheDir string
	list              *libcni.NetworkConfigList
	m                 *ocicni.Manager
	raw               *libcni.CNIConfig
	// Time spent in plugin processes, by each side: what is left of a
	// pod's time is the side's own work.
	mgrPlugins, rawPlugins *pluginClock
}

// pluginClock adds up the time plugin processes take. As an invoke.Exec
// it runs them as libcni's default executor does; as a PluginHook it
// reads the manager's.
type pluginClock struct {
	invoke.RawExec
	ns atomic.Int64
}

func newPluginClock() *pluginClock { return &pluginClock{RawExec: invoke.RawExec{Stderr: os.Stderr}} }

func (c *pluginClock) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	start := time.Now()
	defer func() { c.ns.Add(int64(time.Since(start))) }()
	return c.RawExec.ExecPlugin(ctx, path, stdin, environ)
}

func (c *pluginClock) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

func (c *pluginClock) hook(_ context.Context, r ocicni.PluginRun) { c.ns.Add(int64(r.Duration)) }

func (c *pluginClock) total() time.Duration { return time.Duration(c.ns.Load()) }

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
	e.mgrPlugins, e.rawPlugins = newPluginClock(), newPluginClock()
	e.m = newQuietManager(b, e.confDir, e.cacheDir, ocicni.WithPluginHook(e.mgrPlugins.hook))
	e.raw = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, filepath.Join(dir, "rawcache"), e.rawPlugins)
	return e
}

// newQuietManager returns a manager without a watcher or background DEL
// retries that logs only warnings and errors, as a benchmark wants:
// logging at Info level is the runtime's choice, and retries of the DELs
// a benchmark fails on purpose are not part of the path measured.
func newQuietManager(b *testing.B, confDir, cacheDir string, extra ...ocicni.Option) *ocicni.Manager {
	b.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := ocicni.New(append([]ocicni.Option{
		ocicni.WithConfDir(confDir), ocicni.WithBinDirs(pluginDir), ocicni.WithCacheDir(cacheDir),
		ocicni.WithoutWatcher(), ocicni.WithoutHealing(), ocicni.WithLogger(logrus.NewEntry(logger)),
	}, extra...)...)
	require.NoError(b, err)
	b.Cleanup(func() { _ = m.Shutdown() })
	return m
}
