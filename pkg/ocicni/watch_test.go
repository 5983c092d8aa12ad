//go:build !nowatchtests

package ocicni

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// The watcher reloads within a few debounce periods; the long deadline only
// matters on a loaded machine.
const (
	watchDebounce = 10 * time.Millisecond
	watchTimeout  = 5 * time.Second
	watchTick     = 5 * time.Millisecond
)

// watchEnv is a loaderEnv whose manager watches.
type watchEnv struct{ *loaderEnv }

func newWatchEnv(t *testing.T) *watchEnv {
	t.Helper()
	return &watchEnv{newLoaderEnv(t)}
}

// manager starts a watching manager; later options override earlier ones.
func (e *watchEnv) manager(t *testing.T, opts ...Option) *Manager {
	t.Helper()
	return e.loaderEnv.manager(t, append([]Option{withWatcher, WithReloadDebounce(watchDebounce)}, opts...)...)
}

// waitNetworks waits until exactly the given networks are loaded.
func waitNetworks(t *testing.T, m *Manager, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, m.Networks())
	}, watchTimeout, watchTick)
}

// waitState waits until exactly the given networks are loaded and the
// default network is def.
func waitState(t *testing.T, m *Manager, def string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		set := m.e.snapshot() // one snapshot, so both checks see the same reload
		assert.ElementsMatch(c, want, set.Names())
		assert.Equal(c, def, set.DefaultName())
	}, watchTimeout, watchTick)
}

func waitPluginTypes(t *testing.T, m *Manager, name string, want ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, pluginTypes(m, name))
	}, watchTimeout, watchTick)
}

func waitSkipped(t *testing.T, m *Manager, path string, want error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.ErrorIs(c, skippedFile(m, path), want)
	}, watchTimeout, watchTick)
}

func TestWatchCreate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		initial     map[string]string
		add         map[string]string
		ignored     map[string]string // written too, but never loaded
		wantDefault string
		wantNets    []string
	}{
		{
			name:        "first file into an empty dir becomes the default",
			add:         map[string]string{"10-a.conflist": conflist("a", "1.0.0", "good")},
			wantDefault: "a", wantNets: []string{"a"},
		},
		{
			name:        "file sorting first takes over the default",
			initial:     map[string]string{"10-a.conflist": conflist("a", "1.0.0", "good")},
			add:         map[string]string{"05-x.conflist": conflist("x", "1.0.0", "other")},
			wantDefault: "x", wantNets: []string{"a", "x"},
		},
		{
			name:        "file sorting last keeps the default",
			initial:     map[string]string{"10-a.conflist": conflist("a", "1.0.0", "good")},
			add:         map[string]string{"20-b.conflist": conflist("b", "1.0.0", "good")},
			wantDefault: "a", wantNets: []string{"a", "b"},
		},
		{
			name:    "conf and json files are watched too",
			initial: map[string]string{"10-a.conflist": conflist("a", "1.0.0", "good")},
			add: map[string]string{
				"05-c.conf": `{"cniVersion":"0.4.0","name":"c","type":"good"}`,
				"20-j.json": `{"cniVersion":"0.3.1","name":"j","type":"other"}`,
			},
			wantDefault: "c", wantNets: []string{"a", "c", "j"},
		},
		{
			name:        "files with other extensions are ignored",
			initial:     map[string]string{"10-a.conflist": conflist("a", "1.0.0", "good")},
			ignored:     map[string]string{"00-txt.txt": conflist("txt", "1.0.0", "good"), "01-bak.conflist.bak": conflist("bak", "1.0.0", "good")},
			add:         map[string]string{"20-b.conflist": conflist("b", "1.0.0", "good")},
			wantDefault: "a", wantNets: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			for name, content := range tt.initial {
				writeConf(t, e.confDir, name, content)
			}
			m := e.manager(t)
			// Ignored files go first: the reload that shows the added files
			// has seen them too.
			for name, content := range tt.ignored {
				writeConf(t, e.confDir, name, content)
			}
			for name, content := range tt.add {
				writeConf(t, e.confDir, name, content)
			}
			waitState(t, m, tt.wantDefault, tt.wantNets...)
			assert.Empty(t, m.Skipped())
		})
	}
}

func TestWatchAtomicRename(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		staging func(t *testing.T, e *watchEnv) string // the temp file's dir
		ext     string
	}{
		{name: "staged outside the conf dir", staging: func(t *testing.T, _ *watchEnv) string { t.Helper(); return t.TempDir() }, ext: ".conflist"},
		{name: "staged inside the conf dir with a non-config extension", staging: func(t *testing.T, e *watchEnv) string { t.Helper(); return e.confDir }, ext: ".tmp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			writeConf(t, e.confDir, "20-keep.conflist", conflist("keep", "1.0.0", "good"))
			m := e.manager(t)
			require.Equal(t, "keep", m.GetDefaultNetworkName())
			dir := tt.staging(t, e)
			target := filepath.Join(e.confDir, "10-a.conflist")
			install := func(content string) {
				tmp := writeConf(t, dir, "10-a"+tt.ext, content)
				require.NoError(t, os.Rename(tmp, target))
			}

			// A new file renamed into place.
			install(conflist("a", "1.0.0", "good"))
			waitState(t, m, "a", "a", "keep")
			waitPluginTypes(t, m, "a", "good")

			// Renamed over an existing file: the new content wins.
			install(conflist("a", "1.0.0", "other", "good"))
			waitPluginTypes(t, m, "a", "other", "good")

			// Renamed over with another network name: the old one goes.
			install(conflist("renamed", "1.0.0", "good"))
			waitState(t, m, "renamed", "keep", "renamed")

			assert.Empty(t, m.Skipped(), "the staged file is never loaded")
		})
	}
}

func TestWatchWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rewrite   string
		wantNet   string
		wantTypes []string
	}{
		{name: "plugin type changed", rewrite: conflist("a", "1.0.0", "other"), wantNet: "a", wantTypes: []string{"other"}},
		{name: "plugin added", rewrite: conflist("a", "1.0.0", "good", "other"), wantNet: "a", wantTypes: []string{"good", "other"}},
		{name: "network renamed", rewrite: conflist("z", "1.0.0", "good"), wantNet: "z", wantTypes: []string{"good"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			path := writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
			m := e.manager(t)
			require.Equal(t, []string{"good"}, pluginTypes(m, "a"))

			// os.WriteFile truncates and writes the same inode in place.
			require.NoError(t, os.WriteFile(path, []byte(tt.rewrite), 0o644))
			waitState(t, m, tt.wantNet, tt.wantNet)
			waitPluginTypes(t, m, tt.wantNet, tt.wantTypes...)
		})
	}
}

func TestWatchRemove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		files       []string // network names; file i is "<i>0-<name>.conflist"
		remove      string   // network whose file is removed
		wantDefault string
		wantNets    []string
	}{
		{name: "default file removed: default follows the next file", files: []string{"a", "b", "c"}, remove: "a", wantDefault: "b", wantNets: []string{"b", "c"}},
		{name: "non-default file removed", files: []string{"a", "b", "c"}, remove: "b", wantDefault: "a", wantNets: []string{"a", "c"}},
		{name: "only file removed", files: []string{"a"}, remove: "a", wantDefault: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			paths := map[string]string{}
			for i, n := range tt.files {
				paths[n] = writeConf(t, e.confDir, fmt.Sprintf("%d0-%s.conflist", i+1, n), conflist(n, "1.0.0", "good"))
			}
			m := e.manager(t)
			require.Equal(t, tt.files, m.Networks())
			require.NoError(t, m.Status())

			require.NoError(t, os.Remove(paths[tt.remove]))
			waitState(t, m, tt.wantDefault, tt.wantNets...)
			if tt.wantDefault == "" {
				err := m.Status()
				require.ErrorIs(t, err, ErrNoDefaultNetwork)
				assert.Contains(t, err.Error(), e.confDir)
			} else {
				require.NoError(t, m.Status())
			}
		})
	}
}

func TestWatchConfDirCreatedLate(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"net.d", "a/b/net.d", "a/b/c/net.d"} {
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			e.confDir = filepath.Join(t.TempDir(), filepath.FromSlash(rel))
			m := e.manager(t)
			require.Empty(t, m.Networks())
			require.ErrorIs(t, m.Status(), ErrNoDefaultNetwork)

			require.NoError(t, os.MkdirAll(e.confDir, 0o755))
			writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
			waitState(t, m, "a", "a")
			require.NoError(t, m.Status())

			// The new dir itself is watched now, not only its ancestor.
			writeConf(t, e.confDir, "20-b.conflist", conflist("b", "1.0.0", "good"))
			waitState(t, m, "a", "a", "b")
		})
	}
}

// TestWatchConfDirRecreated covers cri-o/ocicni#42: a conf dir that is
// deleted (or moved away) and recreated must still be watched, whether it
// comes back at once or after the watcher has seen it gone.
func TestWatchConfDirRecreated(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		name    string
		remove  func(t *testing.T, e *watchEnv, round int)
		restore func(t *testing.T, e *watchEnv, round int) // writes 10-r.conflist with network r<round>
	}{
		{
			name: "removed and recreated",
			remove: func(t *testing.T, e *watchEnv, _ int) {
				t.Helper()
				require.NoError(t, os.RemoveAll(e.confDir))
			},
			restore: func(t *testing.T, e *watchEnv, round int) {
				t.Helper()
				require.NoError(t, os.Mkdir(e.confDir, 0o755))
				writeConf(t, e.confDir, "10-r.conflist", conflist(fmt.Sprintf("r%d", round), "1.0.0", "good"))
			},
		},
		{
			name: "moved away and replaced by a renamed dir",
			remove: func(t *testing.T, e *watchEnv, round int) {
				t.Helper()
				require.NoError(t, os.Rename(e.confDir, filepath.Join(e.root, fmt.Sprintf("old%d", round))))
			},
			restore: func(t *testing.T, e *watchEnv, round int) {
				t.Helper()
				staged := filepath.Join(e.root, fmt.Sprintf("staged%d", round))
				require.NoError(t, os.Mkdir(staged, 0o755))
				writeConf(t, staged, "10-r.conflist", conflist(fmt.Sprintf("r%d", round), "1.0.0", "good"))
				require.NoError(t, os.Rename(staged, e.confDir))
			},
		},
	}
	for _, kind := range kinds {
		for _, settle := range []bool{false, true} {
			name := kind.name + "/at once"
			if settle {
				name = kind.name + "/after the removal is seen"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newWatchEnv(t)
				writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
				m := e.manager(t)
				require.Equal(t, []string{"a"}, m.Networks())

				for round := 1; round <= 2; round++ {
					kind.remove(t, e, round)
					if settle {
						waitState(t, m, "")
					}
					kind.restore(t, e, round)
					r := fmt.Sprintf("r%d", round)
					waitState(t, m, r, r)
					// Prove the new dir is watched: the reload above may
					// have come from the event on the parent dir alone.
					writeConf(t, e.confDir, "20-extra.conflist", conflist("extra", "1.0.0", "good"))
					waitState(t, m, r, r, "extra")
				}
			})
		}
	}
}

func TestWatchInvalidFileBesideValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		broken string
		want   error
	}{
		{name: "broken JSON", broken: `{"cniVersion":"1.0.0","name":"b",`, want: ErrInvalidConfig},
		{name: "no plugins", broken: `{"cniVersion":"1.0.0","name":"b","plugins":[]}`, want: ErrInvalidConfig},
		{name: "unsupported version", broken: conflist("b", "1.0.0", "old"), want: ErrUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			installPlugin(t, e.binDir, "old")
			e.exec.PluginVersions("old", "0.3.1")
			writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
			m := e.manager(t)

			// The broken file sorts first, so it would be the default.
			path := writeConf(t, e.confDir, "05-b.conflist", tt.broken)
			waitSkipped(t, m, path, tt.want)
			assert.Equal(t, []string{"a"}, m.Networks())
			assert.Equal(t, "a", m.GetDefaultNetworkName())
			require.NoError(t, m.Status())

			writeConf(t, e.confDir, "05-b.conflist", conflist("b", "1.0.0", "good"))
			waitState(t, m, "b", "a", "b")
			assert.Empty(t, m.Skipped())
		})
	}
}

func TestWatchPluginInstalledLate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// binDirs returns the manager's bin dirs and the one "late" goes to.
		binDirs func(t *testing.T, e *watchEnv) (dirs []string, target string)
	}{
		{
			name: "into an existing bin dir",
			binDirs: func(t *testing.T, e *watchEnv) ([]string, string) {
				t.Helper()
				return []string{e.binDir}, e.binDir
			},
		},
		{
			name: "into the second bin dir",
			binDirs: func(t *testing.T, e *watchEnv) ([]string, string) {
				t.Helper()
				second := t.TempDir()
				return []string{e.binDir, second}, second
			},
		},
		{
			name: "into a bin dir created late",
			binDirs: func(t *testing.T, e *watchEnv) ([]string, string) {
				t.Helper()
				late := filepath.Join(t.TempDir(), "opt", "cni", "bin")
				return []string{e.binDir, late}, late
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newWatchEnv(t)
			path := writeConf(t, e.confDir, "10-late.conflist", conflist("late", "1.0.0", "good", "late"))
			writeConf(t, e.confDir, "20-a.conflist", conflist("a", "1.0.0", "good"))
			dirs, target := tt.binDirs(t, e)
			m := e.manager(t, WithBinDirs(dirs...))
			require.Equal(t, []string{"a"}, m.Networks())
			require.ErrorIs(t, skippedFile(m, path), ErrPluginNotFound)

			// Only the bin dir changes.
			require.NoError(t, os.MkdirAll(target, 0o755))
			installPlugin(t, target, "late")
			waitState(t, m, "late", "a", "late")
			require.NoError(t, skippedFile(m, path), "no skip reason left")
		})
	}
}

// TestWatchBurstCoalesces does not run in parallel with other tests: on a
// machine busy with them, the writes of the burst could be spread over more
// debounce periods than the bound allows.
func TestWatchBurstCoalesces(t *testing.T) {
	const n = 50
	e := newWatchEnv(t)
	installPlugin(t, e.binDir, "probe")
	writeConf(t, e.confDir, "00-probe.conflist", conflist("probe", "1.0.0", "probe"))
	m := e.manager(t)
	// The loader looks up every plugin of every parsed file on each load,
	// so the lookups of a plugin that only one file uses count the loads.
	require.Equal(t, 1, e.exec.Lookups("probe"), "one lookup per load")

	want := []string{"probe"}
	for i := range n {
		name := fmt.Sprintf("net%02d", i)
		writeConf(t, e.confDir, fmt.Sprintf("10-%s.conflist", name), conflist(name, "1.0.0", "good"))
		want = append(want, name)
	}
	waitState(t, m, "probe", want...)
	reloads := e.exec.Lookups("probe") - 1
	t.Logf("%d files written, %d reloads", n, reloads)
	assert.GreaterOrEqual(t, reloads, 1)
	assert.LessOrEqual(t, reloads, n/5, "a burst of events is coalesced into few reloads")
}

// inotifyFDs counts this process's open inotify instances. The tests that
// count them, or count goroutines with managerGoroutines, see every test's
// managers, so they never call t.Parallel: serial tests run before the
// parallel ones start.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open fds: %v", err)
	}
	count := 0
	for _, ent := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", ent.Name())); err == nil && l == "anon_inode:inotify" {
			count++
		}
	}
	return count
}

// goroutineStacks returns the stacks of every goroutine, as
// runtime.Stack writes them: separated by blank lines.
func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// managerGoroutines returns the IDs of the live goroutines started by
// this package, by its config loader (package netconf) or by fsnotify. A
// goroutine's ID is never reused.
func managerGoroutines() map[string]bool {
	ids := map[string]bool{}
	for _, g := range strings.Split(goroutineStacks(), "\n\n") {
		if strings.Contains(g, "\ncreated by github.com/seed-671fdd43/ocicni/pkg/ocicni.") ||
			strings.Contains(g, "\ncreated by github.com/seed-671fdd43/ocicni/internal/netconf.") ||
			strings.Contains(g, "\ncreated by github.com/fsnotify/fsnotify.") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			ids[id] = true
		}
	}
	return ids
}

// parkedIn reports whether a goroutine that runs fn (as it appears in a
// stack trace, "(*Manager).Shutdown") is blocked: waiting on a
// WaitGroup, a lock, a channel or a condition, not running.
func parkedIn(fn string) bool {
	for _, g := range strings.Split(goroutineStacks(), "\n\n") {
		header, stack, _ := strings.Cut(g, "\n")
		_, state, _ := strings.Cut(header, "[")
		state, _, _ = strings.Cut(state, "]")
		state, _, _ = strings.Cut(state, ",") // "select, 2 minutes"
		if strings.Contains(stack, "ocicni."+fn+"(") &&
			state != "running" && state != "runnable" && state != "syscall" {
			return true
		}
	}
	return false
}

func newGoroutines(before map[string]bool) []string {
	var ids []string
	for id := range managerGoroutines() {
		if !before[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestWatchShutdown(t *testing.T) {
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	before := managerGoroutines()
	fds := inotifyFDs(t)

	m := e.manager(t)
	started := newGoroutines(before)
	require.NotEmpty(t, started, "New starts the watcher")
	require.Equal(t, fds+1, inotifyFDs(t), "the config watcher's (the results index is made at the first teardown)")
	writeConf(t, e.confDir, "20-b.conflist", conflist("b", "1.0.0", "good"))
	waitNetworks(t, m, "a", "b")

	require.NoError(t, m.Shutdown())
	// The watcher closes its fsnotify watcher before it signals the
	// WaitGroup, so a Shutdown that waits leaves no inotify fd behind.
	assert.Equal(t, fds, inotifyFDs(t), "Shutdown returned before the watcher closed")
	require.Eventually(t, func() bool {
		live := managerGoroutines()
		for _, id := range started {
			if live[id] {
				return false
			}
		}
		return true
	}, watchTimeout, watchTick, "goroutines leaked")

	// Changes after Shutdown are not applied. A second manager watches
	// the same dir: once it has applied the changes, a live watcher of
	// the first one would have seen the same events too.
	set := m.e.snapshot()
	witness := e.manager(t)
	writeConf(t, e.confDir, "05-c.conflist", conflist("c", "1.0.0", "good"))
	require.NoError(t, os.Remove(filepath.Join(e.confDir, "10-a.conflist")))
	waitNetworks(t, witness, "b", "c")
	assert.Same(t, set, m.e.snapshot(), "a change after Shutdown was applied")
	assert.Equal(t, []string{"a", "b"}, m.Networks())

	// Shutdown again, also concurrently, is fine.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Shutdown()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestWatchShutdownWithoutWatcher(t *testing.T) {
	e := newWatchEnv(t)
	before := managerGoroutines()
	m := e.manager(t, WithoutWatcher(), WithoutHealing()) // healing has a goroutine of its own
	assert.Empty(t, newGoroutines(before))
	require.NoError(t, m.Shutdown())
	require.NoError(t, m.Shutdown())
}

func TestWatchSurvivesConfDirReplacedByFile(t *testing.T) {
	t.Parallel()
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	m := e.manager(t)
	require.Equal(t, []string{"a"}, m.Networks())

	require.NoError(t, os.RemoveAll(e.confDir))
	require.NoError(t, os.WriteFile(e.confDir, nil, 0o644))
	// The watcher notices and fails to read the "dir".
	require.Eventually(t, func() bool {
		for _, entry := range e.log.AllEntries() {
			if err, ok := entry.Data[logrus.ErrorKey].(error); ok && errors.Is(err, syscall.ENOTDIR) {
				return true
			}
		}
		return false
	}, watchTimeout, watchTick, "no failed reload was logged")

	require.NoError(t, os.Remove(e.confDir))
	require.NoError(t, os.Mkdir(e.confDir, 0o755))
	writeConf(t, e.confDir, "20-b.conflist", conflist("b", "1.0.0", "good"))
	waitState(t, m, "b", "b")
	writeConf(t, e.confDir, "30-c.conflist", conflist("c", "1.0.0", "good"))
	waitState(t, m, "b", "b", "c")
}

func TestWatchShutdownWaitsForRunningReload(t *testing.T) {
	e := newWatchEnv(t)
	// VERSION of "slow" is held, like a plugin that ignores cancellation.
	slow := e.exec.Gate(fakecni.Match{PluginType: "slow"}, fakecni.IgnoreContext())
	m := e.manager(t)
	fds := inotifyFDs(t)
	t.Cleanup(slow.Release) // let the watcher go if an assertion failed

	installPlugin(t, e.binDir, "slow")
	writeConf(t, e.confDir, "10-slow.conflist", conflist("slow", "1.0.0", "slow"))
	slow.WaitEntered(t, 1)

	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, m.Shutdown())
	}()
	closed := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	// Shutdown either returns (wrongly: the watcher is still held) or
	// parks, waiting; once it is parked, only the release can wake it.
	require.Eventually(t, func() bool { return closed() || parkedIn("(*Manager).Shutdown") },
		watchTimeout, watchTick, "Shutdown neither returned nor waited")
	require.False(t, closed(), "Shutdown returned while the watcher was busy")
	slow.Release()
	require.Eventually(t, closed, watchTimeout, watchTick)
	assert.Equal(t, fds-1, inotifyFDs(t))
}
