package netconf

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/conflist"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// loadBound is how long a load of a few small files may take, even on a
// loaded machine. It bounds calls that must return; nothing waits for it
// to pass.
const loadBound = 5 * time.Second

// env is a conf dir and a bin dir under one test-owned root, and a fake
// exec that finds a plugin where a file of its name is (none is ever run)
// and answers VERSION: loading needs no plugin to run.
type env struct {
	confDir, binDir string
	exec            *fakecni.Exec
	log             *test.Hook
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{confDir: filepath.Join(root, "net.d"), binDir: filepath.Join(root, "bin"), exec: fakecni.New()}
	e.exec.SetFindMode(fakecni.FindOnDisk)
	require.NoError(t, os.Mkdir(e.confDir, 0o755))
	require.NoError(t, os.Mkdir(e.binDir, 0o755))
	e.install(t, "good")
	return e
}

// loader creates a loader without a watcher that waits a minute for
// VERSION answers; set changes the config first. It is shut down at
// cleanup.
func (e *env) loader(t *testing.T, set func(*Config)) *Loader {
	t.Helper()
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	e.log = hook
	cfg := Config{
		ConfDir: e.confDir, BinDirs: []string{e.binDir},
		Exec: e.exec, Log: logrus.NewEntry(logger),
		VersionWait: time.Minute,
	}
	if set != nil {
		set(&cfg)
	}
	var l *Loader
	var err error
	testenv.Within(t, loadBound, "New", func() { l, err = New(cfg) })
	require.NoError(t, err)
	t.Cleanup(l.Shutdown)
	return l
}

// install puts a plugin file into the bin dir; it is never run.
func (e *env) install(t *testing.T, typ string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(e.binDir, typ), nil, 0o755))
}

// write writes a config file into the conf dir and returns its path.
func (e *env) write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(e.confDir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// versionGate holds the VERSION calls of plugin type typ; see
// fakecni.Exec.Gate. Tests register its Release with t.Cleanup
// after the loader is made, so that it runs before the loader's Shutdown
// waits for the calls.
func (e *env) versionGate(typ string, opts ...fakecni.GateOption) *fakecni.Gate {
	return e.exec.Gate(fakecni.Match{Verb: "VERSION", PluginType: typ}, opts...)
}

// conflistOf returns a network config list at 1.0.0 with one plugin per
// type.
func conflistOf(name string, types ...string) string {
	return string(conflist.Build(name, "1.0.0", types...))
}

// pluginTypes returns the plugin types of network name in set, nil if
// it is not loaded.
func pluginTypes(set *Set, name string) []string {
	n := set.Network(name)
	if n == nil {
		return nil
	}
	types := make([]string, 0, len(n.List.Plugins))
	for _, p := range n.List.Plugins {
		types = append(types, p.Network.Type)
	}
	return types
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
