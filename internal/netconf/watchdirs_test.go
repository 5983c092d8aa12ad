//go:build !nowatchtests

package netconf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A conf dir made, at any depth, below the watched ancestor between that
// ancestor's listing and its watch makes no event of its own. sync must
// find it anyway. Deterministic: the dirs are made inside the watch's
// add, the moment when the old single pass lost them.
func TestWatchSyncFindsDirsMadeBeforeTheWatch(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"net.d", "a/net.d", "a/b/c/net.d"} {
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			confDir := filepath.Join(root, filepath.FromSlash(rel))
			w := newWatcher(confDir, nil, 0, nil, logrus.NewEntry(logrus.New()), nil, nil)
			require.NotNil(t, w.fsw)
			t.Cleanup(func() { _ = w.fsw.Close() })
			require.Equal(t, []string{root}, w.fsw.WatchList())

			// The first level appears; as its watch is added, MkdirAll
			// has already made the rest, and a file is in the conf dir.
			top, _, _ := strings.Cut(rel, "/")
			first := filepath.Join(root, top)
			require.NoError(t, os.Mkdir(first, 0o755))
			raced := false
			w.addWatch = func(d string) error {
				if d == first && !raced {
					raced = true
					require.NoError(t, os.MkdirAll(confDir, 0o755))
					require.NoError(t, os.WriteFile(filepath.Join(confDir, "10-a.conflist"), nil, 0o644))
				}
				return w.fsw.Add(d)
			}
			assert.True(t, w.sync(), "sync added watches")

			assert.ElementsMatch(t, []string{confDir, filepath.Dir(confDir)}, w.fsw.WatchList(),
				"the conf dir, made before its ancestor's watch, and its parent; no other ancestor")
			assert.False(t, w.sync(), "a second sync finds nothing new")

			// The conf dir's own watch is live: a new file is an event.
			p := filepath.Join(confDir, "20-b.conflist")
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			requireEvent(t, w, p)
		})
	}
}

// A conf dir deleted and made again can get the inode number of the old
// one, while fsnotify still lists the old one's dead watch: neither tells
// sync that the dir is new. Deterministic: no goroutine reads the events,
// so fsnotify's reader, blocked on sending the event of a file made
// first, does not drop the dead watch before sync; the record of the
// watched dir is made to match the new one, as a reused inode number
// would.
func TestWatchSyncRewatchesADirThatLooksTheSame(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	confDir := filepath.Join(root, "net.d")
	require.NoError(t, os.Mkdir(confDir, 0o755))
	w := newWatcher(confDir, nil, 0, nil, logrus.NewEntry(logrus.New()), nil, nil)
	require.NotNil(t, w.fsw)
	t.Cleanup(func() { _ = w.fsw.Close() })

	require.NoError(t, os.WriteFile(filepath.Join(root, "first"), nil, 0o644))
	require.NoError(t, os.Remove(confDir))
	require.NoError(t, os.Mkdir(confDir, 0o755))
	fi, err := os.Stat(confDir)
	require.NoError(t, err)
	w.watched[confDir] = fi // as if the new dir had the old one's inode number
	require.Contains(t, w.fsw.WatchList(), confDir, "fsnotify still lists the dead watch")
	w.sync()

	p := filepath.Join(confDir, "10-a.conflist")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	requireEvent(t, w, p)
}

// requireEvent waits for an event on path from the watcher's fsnotify
// watcher, which no goroutine of the watcher reads (run is not started).
func requireEvent(t *testing.T, w *watcher, path string) {
	t.Helper()
	timeout := time.After(loadBound)
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			require.True(t, ok, "events closed")
			if ev.Name == path && ev.Has(fsnotify.Create) {
				return
			}
		case err := <-w.fsw.Errors:
			require.NoError(t, err)
		case <-timeout:
			require.FailNow(t, "no event for "+path)
		}
	}
}

// A conf dir that is missing at start, at any depth, is loaded once it
// appears, and its own watch sees the next file. The deadline is
// loadBound, below the resync's: only the watches can make it. Dirs and
// files are made as fast as the test can, racing the watcher.
func TestWatchConfDirAppears(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"net.d", "a/net.d", "a/b/c/net.d"} {
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.confDir = filepath.Join(t.TempDir(), filepath.FromSlash(rel))
			_, wait := e.watchingLoader(t)

			require.NoError(t, os.MkdirAll(e.confDir, 0o755))
			e.write(t, "10-a.conflist", conflistOf("a", "good"))
			wait("the first file of the late conf dir", hasNetworks("a"))
			e.write(t, "20-b.conflist", conflistOf("b", "good"))
			wait("a file written once the conf dir is watched", hasNetworks("a", "b"))
		})
	}
}

// The conf dir, or an ancestor of it, removed and recreated, whether the
// watcher has seen it gone or not: each round's file is loaded, and so is
// a file written after it, through the new dirs' watches.
func TestWatchConfDirTreeRecreated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		remove string // relative to the root; the conf dir is a/b/net.d
	}{
		{"conf dir", "a/b/net.d"},
		{"parent", "a/b"},
		{"grandparent", "a"},
	} {
		for _, seen := range []bool{false, true} {
			name := tc.name + "/at once"
			if seen {
				name = tc.name + "/after the removal is seen"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				root := t.TempDir()
				e.confDir = filepath.Join(root, "a", "b", "net.d")
				require.NoError(t, os.MkdirAll(e.confDir, 0o755))
				e.write(t, "10-a.conflist", conflistOf("a", "good"))
				_, wait := e.watchingLoader(t)
				wait("the initial file", hasNetworks("a"))

				for _, round := range []string{"r1", "r2"} {
					require.NoError(t, os.RemoveAll(filepath.Join(root, filepath.FromSlash(tc.remove))))
					if seen {
						wait("the removal", hasNetworks())
					}
					require.NoError(t, os.MkdirAll(e.confDir, 0o755))
					e.write(t, "10-a.conflist", conflistOf(round, "good"))
					wait("the recreated dir's file", hasNetworks(round))
					e.write(t, "20-b.conflist", conflistOf(round+"b", "good"))
					wait("a file in the recreated dir, through its watch", hasNetworks(round, round+"b"))
				}
			})
		}
	}
}

// hasNetworks returns a check that the set holds exactly the networks
// names.
func hasNetworks(names ...string) func(*Set) bool {
	return func(s *Set) bool {
		return slices.Equal(s.Names(), names)
	}
}
