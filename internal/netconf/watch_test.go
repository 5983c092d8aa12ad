//go:build !nowatchtests

package netconf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchRelevant(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	confDir := filepath.Join(root, "etc", "net.d")
	binDir := filepath.Join(root, "bin")
	for _, d := range []string{confDir, binDir, filepath.Join(confDir, "newdir")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	w := &watcher{
		confDir: confDir,
		targets: []string{confDir, binDir},
		subDirs: map[string]bool{filepath.Join(confDir, "mynet"): true},
	}
	tests := []struct {
		name string
		path string
		op   fsnotify.Op
		want bool
	}{
		{name: "conflist", path: filepath.Join(confDir, "10-a.conflist"), op: fsnotify.Create, want: true},
		{name: "conf", path: filepath.Join(confDir, "10-a.conf"), op: fsnotify.Write, want: true},
		{name: "json removed", path: filepath.Join(confDir, "10-a.json"), op: fsnotify.Remove, want: true},
		{name: "staged file", path: filepath.Join(confDir, "10-a.conflist.tmp"), op: fsnotify.Create, want: false},
		{name: "staged file renamed away", path: filepath.Join(confDir, ".10-a.conflist.1234"), op: fsnotify.Rename, want: false},
		{name: "new sub-folder", path: filepath.Join(confDir, "newdir"), op: fsnotify.Create, want: true},
		{name: "known sub-folder removed", path: filepath.Join(confDir, "mynet"), op: fsnotify.Remove, want: true},
		{name: "plugin config in a sub-folder", path: filepath.Join(confDir, "mynet", "10-tuning.conf"), op: fsnotify.Write, want: true},
		{name: "other file in a sub-folder", path: filepath.Join(confDir, "mynet", "10-tuning.conf.swp"), op: fsnotify.Write, want: false},
		{name: "plugin binary", path: filepath.Join(binDir, "bridge"), op: fsnotify.Create, want: true},
		{name: "conf dir itself", path: confDir, op: fsnotify.Remove, want: true},
		{name: "ancestor of the conf dir", path: filepath.Join(root, "etc"), op: fsnotify.Create, want: true},
		{name: "unrelated", path: filepath.Join(root, "elsewhere.conflist"), op: fsnotify.Create, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, w.relevant(fsnotify.Event{Name: tt.path, Op: tt.op}))
		})
	}
}

// watchingLoader returns a loader with the watcher on and the default
// debounce, and a function that waits until a published set satisfies ok.
func (e *env) watchingLoader(t *testing.T) (*Loader, func(what string, ok func(*Set) bool)) {
	t.Helper()
	l := e.loader(t, func(c *Config) { c.Watch, c.Debounce = true, 100*time.Millisecond })
	wait := func(what string, ok func(*Set) bool) {
		t.Helper()
		timeout := time.After(loadBound)
		for {
			next := l.Published() // before the check: no publication is missed
			if ok(l.Snapshot()) {
				return
			}
			select {
			case <-next:
			case <-timeout:
				require.FailNow(t, "never published: "+what)
			}
		}
	}
	return l, wait
}

// A config that is a symlink to a file outside the conf dir follows that
// file: written in place, or replaced by a rename in its own directory.
func TestWatchSymlinkedConfigTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.install(t, "other")
	outside := filepath.Join(filepath.Dir(e.confDir), "managed")
	require.NoError(t, os.Mkdir(outside, 0o755))
	target := filepath.Join(outside, "podnet.conflist")
	require.NoError(t, os.WriteFile(target, []byte(conflistOf("podnet", "good")), 0o644))
	require.NoError(t, os.Symlink(target, filepath.Join(e.confDir, "10-podnet.conflist")))
	_, wait := e.watchingLoader(t)
	wait("the symlinked config", func(s *Set) bool { return slices.Equal(pluginTypes(s, "podnet"), []string{"good"}) })

	require.NoError(t, os.WriteFile(target, []byte(conflistOf("podnet", "good", "other")), 0o644))
	wait("the target written in place", func(s *Set) bool {
		return slices.Equal(pluginTypes(s, "podnet"), []string{"good", "other"})
	})

	staged := filepath.Join(outside, ".podnet.tmp")
	require.NoError(t, os.WriteFile(staged, []byte(conflistOf("podnet", "other")), 0o644))
	require.NoError(t, os.Rename(staged, target))
	wait("the target replaced by a rename", func(s *Set) bool { return slices.Equal(pluginTypes(s, "podnet"), []string{"other"}) })
}

// The layout of a Kubernetes ConfigMap volume: the configs are symlinks
// through ..data, a symlink to a timestamped directory, and an update
// writes a new directory and swaps ..data to it with a rename.
func TestWatchDataSymlinkSwap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.install(t, "other")
	gen := func(n int, types ...string) string {
		d := filepath.Join(e.confDir, fmt.Sprintf("..2026_11_30_%d", n))
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "10-podnet.conflist"), []byte(conflistOf("podnet", types...)), 0o644))
		return filepath.Base(d)
	}
	require.NoError(t, os.Symlink(gen(1, "good"), filepath.Join(e.confDir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "10-podnet.conflist"), filepath.Join(e.confDir, "10-podnet.conflist")))
	_, wait := e.watchingLoader(t)
	wait("the first generation", func(s *Set) bool { return slices.Equal(pluginTypes(s, "podnet"), []string{"good"}) })

	next := gen(2, "good", "other")
	require.NoError(t, os.Symlink(next, filepath.Join(e.confDir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(e.confDir, "..data_tmp"), filepath.Join(e.confDir, "..data")))
	require.NoError(t, os.RemoveAll(filepath.Join(e.confDir, "..2026_11_30_1")))
	wait("the second generation", func(s *Set) bool {
		return slices.Equal(pluginTypes(s, "podnet"), []string{"good", "other"})
	})
}
