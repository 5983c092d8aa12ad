package netconf

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A loader whose fsnotify watcher cannot be made (no inotify instance
// left) still starts: it polls the conf dir, so a new file is loaded
// within the poll interval, and it says why. Once a watcher can be made,
// inotify takes over: the next file is loaded by its event.
func TestWatchFallsBackToPolling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.install(t, "other")
	var full atomic.Bool
	full.Store(true)
	var tries atomic.Int32
	l := e.loader(t, func(c *Config) {
		c.Watch, c.Debounce = true, 10*time.Millisecond
		c.newFSW = func() (*fsnotify.Watcher, error) {
			tries.Add(1)
			if full.Load() {
				return nil, syscall.EMFILE
			}
			return fsnotify.NewWatcher()
		}
	})
	polling, cause := l.WatchHealth()
	require.True(t, polling)
	require.ErrorIs(t, cause, syscall.EMFILE)

	wait := func(what string, ok func(*Set) bool) time.Duration {
		t.Helper()
		start := time.Now()
		require.Eventually(t, func() bool { return ok(l.Snapshot()) }, loadBound, time.Millisecond, what)
		return time.Since(start)
	}
	write := func(name, network string) {
		require.NoError(t, os.WriteFile(filepath.Join(e.confDir, name), []byte(conflistOf(network, "other")), 0o644))
	}
	write("20-b.conflist", "b")
	took := wait("a file polled", func(s *Set) bool { return s.DefaultName() == "b" })
	t.Logf("polled in %v (poll interval %v)", took, pollInterval)
	assert.GreaterOrEqual(t, tries.Load(), int32(2), "the watcher is tried again at each poll")

	full.Store(false)
	require.Eventually(t, func() bool { p, _ := l.WatchHealth(); return !p }, loadBound, time.Millisecond,
		"inotify takes over once a watcher can be made")
	before := l.WatchStats()
	write("10-a.conflist", "a")
	wait("a file seen by inotify", func(s *Set) bool { return s.DefaultName() == "a" })
	assert.Greater(t, l.WatchStats().Leading+l.WatchStats().Trailing, before.Leading+before.Trailing,
		"loaded by the watcher's events")
}

// A watch that cannot be added (no inotify watch left) makes the watcher
// poll too, until the watch can be added: a file in a dir it could not
// watch is still loaded.
func TestWatchPollsWhileAWatchFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.install(t, "other")
	var full atomic.Bool
	full.Store(true)
	l := e.loader(t, func(c *Config) {
		c.Watch, c.Debounce = true, 10*time.Millisecond
		c.wrapAdd = func(add func(string) error) func(string) error {
			return func(dir string) error {
				if full.Load() && dir == e.confDir {
					return syscall.ENOSPC
				}
				return add(dir)
			}
		}
	})
	polling, cause := l.WatchHealth()
	require.True(t, polling)
	require.ErrorIs(t, cause, syscall.ENOSPC)
	require.NoError(t, os.WriteFile(filepath.Join(e.confDir, "20-b.conflist"), []byte(conflistOf("b", "other")), 0o644))
	require.Eventually(t, func() bool { return l.Snapshot().DefaultName() == "b" }, loadBound, time.Millisecond, "polled")

	full.Store(false)
	require.Eventually(t, func() bool { p, _ := l.WatchHealth(); return !p }, loadBound, time.Millisecond,
		"the watch is added at a later poll")
}
