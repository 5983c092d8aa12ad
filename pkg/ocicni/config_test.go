package ocicni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// loaderEnv is a conf dir and a bin dir under one test-owned root (so the
// conf dir's parent belongs to the test too) and a fake exec that answers
// VERSION: config loading and watching need no plugin to run. The fake
// finds a plugin where a file of its name is in a bin dir, so that tests
// install and remove plugins (installPlugin) while the manager watches.
type loaderEnv struct {
	root, confDir, binDir string
	exec                  *fakecni.Exec
	log                   *test.Hook
}

func newLoaderEnv(t *testing.T) *loaderEnv {
	t.Helper()
	root := t.TempDir()
	e := &loaderEnv{root: root, confDir: filepath.Join(root, "net.d"), binDir: filepath.Join(root, "bin"), exec: fakecni.New()}
	e.exec.SetFindMode(fakecni.FindOnDisk)
	require.NoError(t, os.Mkdir(e.confDir, 0o755))
	require.NoError(t, os.Mkdir(e.binDir, 0o755))
	for _, typ := range []string{"good", "other"} {
		installPlugin(t, e.binDir, typ)
	}
	return e
}

// manager starts a manager without a watcher; later options override
// earlier ones (withWatcher turns it back on).
func (e *loaderEnv) manager(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	m, err := New(e.options(t, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Shutdown()) })
	return m
}

// versionCalls returns how many VERSION calls plugin type typ got.
func (e *loaderEnv) versionCalls(typ string) int {
	return e.exec.Count(fakecni.Match{Verb: "VERSION", PluginType: typ})
}

// options returns the options manager uses, followed by opts, and points
// e.log at the new logger.
func (e *loaderEnv) options(t *testing.T, opts ...Option) []Option {
	t.Helper()
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	e.log = hook
	base := []Option{
		WithConfDir(e.confDir), WithBinDirs(e.binDir), WithCacheDir(t.TempDir()),
		WithExec(e.exec), WithoutWatcher(), WithLogger(logrus.NewEntry(logger)),
	}
	return append(base, opts...)
}

func TestConfigSelection(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		fixed       string
		wantDefault string
		wantNets    []string
		wantSkipped map[string]error // file -> sentinel
	}{
		{
			name:        "empty dir",
			wantDefault: "",
		},
		{
			name: "first file in name order is the default",
			files: map[string]string{
				"20-b.conflist": conflist("b", "1.0.0", "good"),
				"10-a.conflist": conflist("a", "1.0.0", "good"),
			},
			wantDefault: "a", wantNets: []string{"a", "b"},
		},
		{
			name: "conf and json become single-plugin lists",
			files: map[string]string{
				"10-x.conf": `{"cniVersion":"0.4.0","name":"x","type":"good"}`,
				"20-y.json": `{"cniVersion":"0.3.1","name":"y","type":"other"}`,
				"30-z.txt":  conflist("z", "1.0.0", "good"),
			},
			wantDefault: "x", wantNets: []string{"x", "y"},
		},
		{
			name: "fixed default name",
			files: map[string]string{
				"10-a.conflist": conflist("a", "1.0.0", "good"),
				"20-b.conflist": conflist("b", "1.0.0", "good"),
			},
			fixed: "b", wantDefault: "b", wantNets: []string{"a", "b"},
		},
		{
			name: "invalid files are skipped with reasons, valid ones still load",
			files: map[string]string{
				"00-badjson.conflist": `{"name": "broken",`,
				"01-noname.conflist":  `{"cniVersion":"1.0.0","plugins":[{"type":"good"}]}`,
				"02-noplug.conflist":  `{"cniVersion":"1.0.0","name":"noplug","plugins":[]}`,
				"03-missing.conflist": conflist("missing", "1.0.0", "good", "absent"),
				"04-version.conflist": conflist("oldonly", "1.0.0", "old"),
				"05-badver.conflist":  conflist("badver", "x.y", "good"),
				"06-notype.conf":      `{"cniVersion":"1.0.0","name":"notype"}`,
				"07-policy.conflist":  `{"cniVersion":"1.0.0","name":"pol","ocicni.teardownPolicy":"maybe","plugins":[{"type":"good"}]}`,
				"08-timeout.conflist": `{"cniVersion":"1.0.0","name":"tmo","ocicni.timeouts":{"del":"ten"},"plugins":[{"type":"good"}]}`,
				"50-ok.conflist":      conflist("ok", "1.0.0", "good"),
			},
			wantDefault: "ok", wantNets: []string{"ok"},
			wantSkipped: map[string]error{
				"00-badjson.conflist": ErrInvalidConfig,
				"01-noname.conflist":  ErrInvalidConfig,
				"02-noplug.conflist":  ErrInvalidConfig,
				"03-missing.conflist": ErrPluginNotFound,
				"04-version.conflist": ErrUnsupportedVersion,
				"05-badver.conflist":  ErrInvalidConfig,
				"06-notype.conf":      ErrInvalidConfig,
				"07-policy.conflist":  ErrInvalidConfig,
				"08-timeout.conflist": ErrInvalidConfig,
			},
		},
		{
			name: "duplicate network name: first file wins",
			files: map[string]string{
				"10-a.conflist": conflist("same", "1.0.0", "good"),
				"20-b.conflist": conflist("same", "1.0.0", "other"),
			},
			wantDefault: "same", wantNets: []string{"same"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoaderEnv(t)
			installPlugin(t, e.binDir, "old")
			e.exec.PluginVersions("old", "0.3.1")
			for name, content := range tt.files {
				writeConf(t, e.confDir, name, content)
			}
			m := e.manager(t, WithDefaultNetwork(tt.fixed))
			assert.Equal(t, tt.wantDefault, m.GetDefaultNetworkName())
			if tt.wantNets == nil {
				tt.wantNets = []string{}
			}
			assert.Equal(t, tt.wantNets, m.Networks())
			skipped := map[string]error{}
			for _, s := range m.Skipped() {
				skipped[filepath.Base(s.File)] = s
			}
			require.Len(t, skipped, len(tt.wantSkipped))
			for file, want := range tt.wantSkipped {
				require.ErrorIs(t, skipped[file], want, file)
			}
		})
	}
}

func TestDuplicateNetworkNameIsLoggedAndDeterministic(t *testing.T) {
	e := newLoaderEnv(t)
	writeConf(t, e.confDir, "20-b.conflist", conflist("same", "1.0.0", "other"))
	writeConf(t, e.confDir, "10-a.conflist", conflist("same", "1.0.0", "good"))
	m := e.manager(t)
	n := m.e.snapshot().Network("same")
	require.NotNil(t, n)
	assert.Equal(t, "good", n.List.Plugins[0].Network.Type)
	found := false
	for _, entry := range e.log.AllEntries() {
		if entry.Data["file"] == filepath.Join(e.confDir, "20-b.conflist") {
			found = true
		}
	}
	assert.True(t, found, "the ignored duplicate is logged with its file")
}

func TestUnknownNetworkSaysWhyItWasSkipped(t *testing.T) {
	e := newLoaderEnv(t)
	writeConf(t, e.confDir, "10-net.conflist", conflist("net", "1.0.0", "good", "macvlan-missing"))
	m := e.manager(t)
	_, _, err := m.e.lookup(context.Background(), m.e.snapshot(), "net")
	require.ErrorIs(t, err, ErrNetworkNotFound)
	require.ErrorIs(t, err, ErrPluginNotFound)
	var nf *NetworkNotFoundError
	require.ErrorAs(t, err, &nf)
	require.Len(t, nf.Skipped, 1)
	assert.Contains(t, err.Error(), "10-net.conflist")
	assert.Contains(t, err.Error(), "macvlan-missing")
	assert.Contains(t, err.Error(), e.binDir)

	_, _, err = m.e.lookup(context.Background(), m.e.snapshot(), "nothing")
	require.ErrorIs(t, err, ErrNetworkNotFound)
	require.NotErrorIs(t, err, ErrPluginNotFound)
}

func TestStatusWithoutDefaultNetwork(t *testing.T) {
	e := newLoaderEnv(t)
	m := e.manager(t)
	err := m.Status()
	require.ErrorIs(t, err, ErrNoDefaultNetwork)
	assert.Contains(t, err.Error(), e.confDir)

	e2 := newLoaderEnv(t)
	writeConf(t, e2.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	m2 := e2.manager(t, WithDefaultNetwork("b"))
	err = m2.Status()
	require.ErrorIs(t, err, ErrNoDefaultNetwork)
	assert.Contains(t, err.Error(), `"b"`)
}

func TestReloadCostsWhatChanged(t *testing.T) {
	e := newLoaderEnv(t)
	for i := range 30 {
		writeConf(t, e.confDir, fmt.Sprintf("%02d.conflist", i), conflist(fmt.Sprintf("net%02d", i), "1.0.0", "good", "other"))
	}
	m := e.manager(t)
	require.Len(t, m.Networks(), 30)
	assert.Equal(t, 1, e.versionCalls("good"), "VERSION runs once per binary, not per file")
	assert.Equal(t, 1, e.versionCalls("other"))

	writeConf(t, e.confDir, "zz-new.conflist", conflist("new", "1.0.0", "good"))
	require.NoError(t, m.Reload(context.Background()))
	assert.Len(t, m.Networks(), 31)
	assert.Equal(t, 1, e.versionCalls("good"), "an unchanged binary is not asked again")

	// A replaced binary is asked again.
	require.NoError(t, os.WriteFile(filepath.Join(e.binDir, "good"), []byte("#!/bin/false\n# v2\n"), 0o755))
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, 2, e.versionCalls("good"))
}

func TestReloadKeepsLastGoodSetWhenDirUnreadable(t *testing.T) {
	e := newLoaderEnv(t)
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	m := e.manager(t)
	require.Equal(t, []string{"a"}, m.Networks())
	// Replace the conf dir by a file: ReadDir fails with ENOTDIR.
	require.NoError(t, os.RemoveAll(e.confDir))
	require.NoError(t, os.WriteFile(e.confDir, nil, 0o644))
	require.Error(t, m.Reload(context.Background()))
	assert.Equal(t, []string{"a"}, m.Networks())
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opt := range []Option{
		WithConfDir("relative"), WithBinDirs("/ok", "rel"), WithCacheDir("rel"),
		WithTeardownPolicy("sometimes"), WithRollbackTimeout(0), WithGCWorkers(0),
		WithReloadDebounce(-1), WithPluginEnv("CNI_X=1"), WithHealing(HealPolicy{Max: -1}),
	} {
		_, err := New(opt, WithoutWatcher())
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
}

// One rule for every option: an empty or nil value means the default,
// also after an earlier option set something else.
func TestEmptyOptionMeansDefault(t *testing.T) {
	dir := t.TempDir()
	defaults := defaultOptions()
	for name, tc := range map[string]struct {
		set, reset Option
		get        func(o *options) any
	}{
		"conf dir":    {WithConfDir(dir), WithConfDir(""), func(o *options) any { return o.confDir }},
		"bin dirs":    {WithBinDirs(dir), WithBinDirs(), func(o *options) any { return o.binDirs }},
		"cache dir":   {WithCacheDir(dir), WithCacheDir(""), func(o *options) any { return o.cacheDir }},
		"logger":      {WithLogger(logrus.NewEntry(logrus.New())), WithLogger(nil), func(o *options) any { return o.log }},
		"exec":        {WithExec(pluginexec.New(os.Stderr)), WithExec(nil), func(o *options) any { return o.exec }},
		"netns ops":   {WithNetNSOps(&recordingNetNS{}), WithNetNSOps(nil), func(o *options) any { return o.netns }},
		"plugin hook": {WithPluginHook(func(context.Context, PluginRun) {}), WithPluginHook(nil), func(o *options) any { return o.pluginHook == nil }},
	} {
		t.Run(name, func(t *testing.T) {
			o := defaultOptions()
			require.NoError(t, tc.set(&o))
			require.NotEqual(t, tc.get(&defaults), tc.get(&o), "set")
			require.NoError(t, tc.reset(&o))
			assert.Equal(t, tc.get(&defaults), tc.get(&o), "reset to the default")
		})
	}
	m, err := New(WithLogger(nil), WithNetNSOps(nil), WithPluginHook(nil), WithExec(nil), WithoutWatcher(), WithConfDir(dir))
	require.NoError(t, err)
	require.NoError(t, m.Shutdown())
}

func TestInvalidatedFileKeepsLastGoodConfig(t *testing.T) {
	e := newLoaderEnv(t)
	path := writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	m := e.manager(t)
	require.Equal(t, []string{"a"}, m.Networks())

	// Half-written by a non-atomic writer: the last good config stays,
	// and the problem is reported.
	require.NoError(t, os.WriteFile(path, []byte(`{"cniVersion":"1.0.0","name":"a","plu`), 0o644))
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, []string{"a"}, m.Networks())
	assert.Equal(t, "a", m.GetDefaultNetworkName())
	require.Len(t, m.Skipped(), 1)
	require.ErrorIs(t, m.Skipped()[0], ErrInvalidConfig)

	// Fixed: the new content is used.
	require.NoError(t, os.WriteFile(path, []byte(conflist("a", "1.0.0", "other")), 0o644))
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, "other", m.e.snapshot().Network("a").List.Plugins[0].Network.Type)
	assert.Empty(t, m.Skipped())

	// Removed: the network goes.
	require.NoError(t, os.Remove(path))
	require.NoError(t, m.Reload(context.Background()))
	assert.Empty(t, m.Networks())
}
