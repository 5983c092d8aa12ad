package ocicni

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// reloadBenchPool is how many watching managers a visibility benchmark
// takes turns with. An event reloads at once only a debounce window (100ms
// by default) after the last reload, so one manager would spend most of
// the run waiting between iterations; with turns, a manager is quiet
// again by the time it is used.
const reloadBenchPool = 32

// benchVisibleTimeout bounds each wait for a reload in the benchmarks.
const benchVisibleTimeout = 10 * time.Second

// reloadBenchManager is a watching manager with the default debounce, on
// a conf dir of its own, with a bin dir of its own after the shared one
// and a directory outside both.
type reloadBenchManager struct {
	root, dir, bin, outside string
	m                       *Manager
	n                       int // changes made so far, for kinds that count
}

// newReloadBenchManagers starts pool managers, each on a conf dir that
// holds files bridge configs written an hour ago (so that they are cached,
// as on a node whose configs have been in place for a while) and, named to
// sort first, the config that each iteration changes, as setup lays it
// out (nil: a plain file of network "initial").
func newReloadBenchManagers(b *testing.B, pool, files int, setup func(b *testing.B, rb *reloadBenchManager, initial string)) []*reloadBenchManager {
	b.Helper()
	testenv.RequireRoot(b)
	n := testenv.Alloc(b) // configs only: no ADD runs, so one network serves all
	logger := logrus.New()
	// Error, not Warn: the binary kinds skip their config, with a Warn,
	// until the binary is in place, once per iteration.
	logger.SetLevel(logrus.ErrorLevel)
	old := time.Now().Add(-time.Hour)
	ms := make([]*reloadBenchManager, pool)
	for i := range ms {
		root := b.TempDir()
		rb := &reloadBenchManager{root: root, dir: filepath.Join(root, "net.d"), bin: filepath.Join(root, "bin"), outside: filepath.Join(root, "outside")}
		for _, d := range []string{rb.dir, rb.bin, rb.outside} {
			require.NoError(b, os.Mkdir(d, 0o755))
		}
		for f := range files {
			p := testenv.WriteFile(b, rb.dir, fmt.Sprintf("%02d-net.conflist", 10+f),
				testenv.BridgeConflist(fmt.Sprintf("net%02d", f), "1.0.0", n, rb.ipam()))
			require.NoError(b, os.Chtimes(p, old, old))
		}
		initial := testenv.BridgeConflist("initial", "1.0.0", n, rb.ipam())
		if setup == nil {
			p := testenv.WriteFile(b, rb.dir, "00-new.conflist", initial)
			require.NoError(b, os.Chtimes(p, old, old))
		} else {
			setup(b, rb, initial)
		}
		m, err := New(WithConfDir(rb.dir), WithBinDirs(pluginDir, rb.bin), WithCacheDir(b.TempDir()),
			WithLogger(logrus.NewEntry(logger)))
		require.NoError(b, err)
		b.Cleanup(func() { _ = m.Shutdown() })
		require.Equal(b, "initial", m.GetDefaultNetworkName())
		require.Len(b, m.Networks(), files+1)
		rb.m = m
		ms[i] = rb
	}
	return ms
}

func (rb *reloadBenchManager) ipam() string { return filepath.Join(rb.root, "ipam") }

// waitIdle waits until m's watcher has no trailing reload due and its
// debounce window has passed, so that the next event reloads at once.
func waitIdle(b *testing.B, m *Manager) {
	b.Helper()
	deadline := time.Now().Add(benchVisibleTimeout)
	for {
		st := m.e.conf.WatchStats()
		if st.Idle(time.Now()) {
			return
		}
		wait := time.Millisecond // while busy
		if !st.Busy {
			wait = time.Until(st.ReadyAt)
		}
		if time.Now().After(deadline) {
			b.Fatal("the watcher never went idle")
		}
		time.Sleep(min(wait, time.Millisecond))
	}
}

// waitPublished waits for the publication after which visible holds.
func waitPublished(b *testing.B, m *Manager, visible func() bool) {
	b.Helper()
	timeout := time.After(benchVisibleTimeout)
	for {
		next := m.e.conf.Published() // taken before the check, so no publication is missed
		if visible() {
			return
		}
		select {
		case <-next:
		case <-timeout:
			b.Fatal("the change never became visible")
		}
	}
}

// stageConfig writes content under a staging name that the loader does
// not read, in dir, and returns the function that renames it to name.
func stageConfig(b *testing.B, dir, name, content string) (rename func()) {
	b.Helper()
	tmp := testenv.WriteFile(b, dir, name+".tmp", content)
	target := filepath.Join(dir, name)
	return func() {
		if err := os.Rename(tmp, target); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReloadBurst renames 20 configs into place back to back, with
// the default debounce, and reports how many reloads the burst cost
// (leading and trailing) and the most any burst cost. The time per
// iteration runs until the last config is visible; the wait for the
// burst's trailing reload and the window after it is not timed.
func BenchmarkReloadBurst(b *testing.B) {
	const burst = 20
	rb := newReloadBenchManagers(b, 1, 0, nil)[0]
	n := testenv.Alloc(b)
	var bursts, reloads, most int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		waitIdle(b, rb.m)
		st := rb.m.e.conf.WatchStats()
		before := st.Leading + st.Trailing
		renames := make([]func(), burst)
		for k := range renames {
			renames[k] = stageConfig(b, rb.dir, fmt.Sprintf("%02d-burst.conflist", 10+k),
				testenv.BridgeConflist(fmt.Sprintf("b%d-%d", i, k), "1.0.0", n, filepath.Join(rb.dir, "ipam")))
		}
		last := fmt.Sprintf("b%d-%d", i, burst-1)
		b.StartTimer()

		for _, rename := range renames {
			rename()
		}
		// A set is built from one read of the conf dir, so the set that
		// holds the last config holds the others too.
		waitPublished(b, rb.m, func() bool { return rb.m.e.snapshot().Network(last) != nil })

		b.StopTimer()
		waitIdle(b, rb.m)
		st = rb.m.e.conf.WatchStats()
		cost := st.Leading + st.Trailing - before
		bursts++
		reloads += cost
		most = max(most, cost)
		b.StartTimer()
	}
	b.ReportMetric(float64(reloads)/float64(bursts), "reloads/burst")
	b.ReportMetric(float64(most), "max-reloads/burst")
}
