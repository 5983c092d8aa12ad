//go:build !nowatchtests

package ocicni

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitWatcherIdle waits until no trailing reload is due and the debounce
// window after the last reload has passed, so that the next event reloads
// at once. A burst is over then: its events have all been handled, since
// fsnotify hands them over long before a window ends.
func waitWatcherIdle(t *testing.T, m *Manager) {
	t.Helper()
	require.Eventually(t, func() bool {
		return m.e.conf.WatchStats().Idle(time.Now())
	}, watchTimeout, watchTick, "the watcher never went idle")
}

// install writes content to a staging name in dir and renames it to name,
// as atomic writers do.
func install(t *testing.T, dir, name, content string) string {
	t.Helper()
	tmp := writeConf(t, dir, name+".tmp", content)
	target := filepath.Join(dir, name)
	require.NoError(t, os.Rename(tmp, target))
	return target
}

func TestWatchRenameIntoPlaceReloadsAtOnce(t *testing.T) {
	t.Parallel()
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "20-keep.conflist", conflist("keep", "1.0.0", "good"))
	m := e.manager(t, WithReloadDebounce(100*time.Millisecond))

	for round := range 3 {
		name := fmt.Sprintf("new%d", round)
		install(t, e.confDir, "10-new.conflist", conflist(name, "1.0.0", "good"))
		waitState(t, m, name, name, "keep")
		waitWatcherIdle(t, m)
		st := m.e.conf.WatchStats()
		assert.Equal(t, int64(round+1), st.Leading, "each rename is a burst of its own, reloaded at once")
		assert.Zero(t, st.Trailing, "the staged file's events are not changes")
	}
}

// TestWatchBurstOf20RenamesReloadsAtMostThreeTimes does not run in parallel
// with other tests, like TestWatchBurstCoalesces.
func TestWatchBurstOf20RenamesReloadsAtMostThreeTimes(t *testing.T) {
	const n = 20
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "00-first.conflist", conflist("first", "1.0.0", "good"))
	m := e.manager(t, WithReloadDebounce(100*time.Millisecond))

	want := []string{"first"}
	for i := range n {
		name := fmt.Sprintf("net%02d", i)
		install(t, e.confDir, fmt.Sprintf("10-%s.conflist", name), conflist(name, "1.0.0", "good"))
		want = append(want, name)
	}
	waitState(t, m, "first", want...)
	waitWatcherIdle(t, m)
	st := m.e.conf.WatchStats()
	leading, trailing := st.Leading, st.Trailing
	t.Logf("%d files renamed into place: %d leading and %d trailing reloads", n, leading, trailing)
	assert.GreaterOrEqual(t, leading, int64(1), "the first rename reloads at once")
	assert.LessOrEqual(t, leading+trailing, int64(3), "a burst of events is coalesced into few reloads")
	assert.Empty(t, m.Skipped())
}

// writeOnLog writes content to path from inside the first log entry about
// path. A reload logs with the loader's lock held, so the write lands
// after the reload that logs has read the file, and before any later
// reload does.
type writeOnLog struct {
	t             *testing.T
	path, content string
	once          sync.Once
	done          chan struct{}
}

func (h *writeOnLog) Levels() []logrus.Level { return logrus.AllLevels }

func (h *writeOnLog) Fire(e *logrus.Entry) error {
	if e.Data["file"] != h.path {
		return nil
	}
	h.once.Do(func() {
		defer close(h.done)
		assert.NoError(h.t, os.WriteFile(h.path, []byte(h.content), 0o644))
	})
	return nil
}

// fileLog returns the levels and messages logged about path, in order.
func fileLog(hook *test.Hook, path string) []string {
	var got []string
	for _, entry := range hook.AllEntries() {
		if entry.Data["file"] == path {
			got = append(got, entry.Level.String()+": "+entry.Message)
		}
	}
	return got
}

func countWarnings(hook *test.Hook, path string) int {
	n := 0
	for _, entry := range hook.AllEntries() {
		if entry.Data["file"] == path && entry.Level == logrus.WarnLevel {
			n++
		}
	}
	return n
}

// TestWatchNonAtomicWriteLoadsWithoutWarning creates a file empty, lets
// the watcher's leading reload read it, and only then writes it: the
// file loads, with no warning on the way.
func TestWatchNonAtomicWriteLoadsWithoutWarning(t *testing.T) {
	t.Parallel()
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	path := filepath.Join(e.confDir, "05-b.conflist")
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	writer := &writeOnLog{t: t, path: path, content: conflist("b", "1.0.0", "good"), done: make(chan struct{})}
	logger.AddHook(writer)
	m := e.manager(t, WithLogger(logrus.NewEntry(logger)))

	require.NoError(t, os.WriteFile(path, nil, 0o644)) // created, not written yet
	select {
	case <-writer.done:
	case <-time.After(watchTimeout):
		require.FailNow(t, "no reload read the empty file")
	}
	waitState(t, m, "b", "a", "b")
	assert.Empty(t, m.Skipped())
	assert.Zero(t, countWarnings(hook, path), "no warning about a file being written: %v", fileLog(hook, path))
	assert.Equal(t, []string{
		"debug: Cannot use CNI config file yet; reloading to confirm",
		"info: Loaded CNI network",
	}, fileLog(hook, path))
}

// TestWatchBrokenFileWarnsOnce renames a broken file into place: the
// leading reload and the one once the events settled (the file may still
// be being written) only note it, the one a debounce window later warns,
// and later reloads stay quiet about it.
func TestWatchBrokenFileWarnsOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(t *testing.T, dir, name, content string) string
	}{
		{name: "renamed into place", write: install},
		{name: "written in place", write: writeConf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
			m := e.manager(t)

			path := tt.write(t, e.confDir, "05-b.conflist", `{"cniVersion":"1.0.0","name":"b",`)
			waitSkipped(t, m, path, ErrInvalidConfig)
			require.Eventually(t, func() bool { return countWarnings(e.log, path) > 0 }, watchTimeout, watchTick,
				"the broken file is never warned about")
			assert.Equal(t, []string{
				"debug: Cannot use CNI config file yet; reloading to confirm",
				"debug: Cannot use CNI config file yet; reloading to confirm",
				"warning: Skipping CNI config file",
			}, fileLog(e.log, path), "the leading reload and the one once the events settled note it, the one a window later warns")

			// Later reloads do not warn again.
			writeConf(t, e.confDir, "20-c.conflist", conflist("c", "1.0.0", "good"))
			waitState(t, m, "a", "a", "c")
			waitWatcherIdle(t, m)
			assert.Equal(t, 1, countWarnings(e.log, path))
			assert.ErrorIs(t, skippedFile(m, path), ErrInvalidConfig)
		})
	}
}
