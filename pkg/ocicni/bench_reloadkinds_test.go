package ocicni

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// reloadKind is one kind of config change that BenchmarkReloadVisible
// times: layout lays out the changed config before the manager starts
// (nil: a plain file), and prepare readies change number i on rb, untimed,
// and returns the change itself (timed) and the check that it is visible.
type reloadKind struct {
	name    string
	layout  func(b *testing.B, rb *reloadBenchManager, initial string)
	prepare func(b *testing.B, rb *reloadBenchManager, net testenv.Net, i int) (change func(), visible func() bool)
}

// isDefault returns the check that name is rb's default network.
func isDefault(rb *reloadBenchManager, name string) func() bool {
	return func() bool { return rb.m.GetDefaultNetworkName() == name }
}

// settled waits until the set rb publishes satisfies ok and the watcher
// is idle again: the untimed part of an iteration.
func settled(b *testing.B, rb *reloadBenchManager, ok func() bool) {
	b.Helper()
	waitPublished(b, rb.m, ok)
	waitIdle(b, rb.m)
}

// waitReloads waits until rb's watcher has run n loads in all.
func waitReloads(b *testing.B, rb *reloadBenchManager, n int64) {
	b.Helper()
	deadline := time.Now().Add(benchVisibleTimeout)
	for {
		st := rb.m.e.conf.WatchStats()
		if st.Leading+st.Trailing >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the watcher never reloaded")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// copyPlugin copies the recorder plugin binary to path with mode.
func copyPlugin(b *testing.B, path string, mode os.FileMode) {
	b.Helper()
	src, err := os.Open(filepath.Join(pluginDir, testenv.Recorder))
	require.NoError(b, err)
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	require.NoError(b, err)
	_, err = io.Copy(dst, src)
	require.NoError(b, err)
	require.NoError(b, dst.Close())
	require.NoError(b, os.Chmod(path, mode)) // umask
}

// pluginConf is a config of network name with one plugin of type typ.
func pluginConf(name, version, typ string) string {
	return testenv.Conflist(name, version, fmt.Sprintf(`{"type":%q}`, typ))
}

var reloadKinds = []reloadKind{
	{
		name: "renamed-in",
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			return stageConfig(b, rb.dir, "00-new.conflist", testenv.BridgeConflist(name, "1.0.0", n, rb.ipam())), isDefault(rb, name)
		},
	},
	{
		name: "written-in-place",
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			content := []byte(testenv.BridgeConflist(name, "1.0.0", n, rb.ipam()))
			return func() { require.NoError(b, os.WriteFile(filepath.Join(rb.dir, "00-new.conflist"), content, 0o644)) }, isDefault(rb, name)
		},
	},
	{
		name: "removed",
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			p := testenv.WriteFile(b, rb.dir, "00-new.conflist", testenv.BridgeConflist(name, "1.0.0", n, rb.ipam()))
			settled(b, rb, isDefault(rb, name))
			return func() { require.NoError(b, os.Remove(p)) }, isDefault(rb, "net00")
		},
	},
	{
		name: "symlink-target",
		layout: func(b *testing.B, rb *reloadBenchManager, initial string) {
			b.Helper()
			target := testenv.WriteFile(b, rb.outside, "new.conflist", initial)
			require.NoError(b, os.Symlink(target, filepath.Join(rb.dir, "00-new.conflist")))
		},
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			return stageConfig(b, rb.outside, "new.conflist", testenv.BridgeConflist(name, "1.0.0", n, rb.ipam())), isDefault(rb, name)
		},
	},
	{
		name: "data-swap",
		layout: func(b *testing.B, rb *reloadBenchManager, initial string) {
			b.Helper()
			gen := filepath.Join(rb.dir, "..gen0")
			require.NoError(b, os.Mkdir(gen, 0o755))
			testenv.WriteFile(b, gen, "00-new.conflist", initial)
			require.NoError(b, os.Symlink("..gen0", filepath.Join(rb.dir, "..data")))
			require.NoError(b, os.Symlink(filepath.Join("..data", "00-new.conflist"), filepath.Join(rb.dir, "00-new.conflist")))
		},
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			rb.n++
			gen, old := fmt.Sprintf("..gen%d", rb.n), fmt.Sprintf("..gen%d", rb.n-1)
			require.NoError(b, os.Mkdir(filepath.Join(rb.dir, gen), 0o755))
			testenv.WriteFile(b, filepath.Join(rb.dir, gen), "00-new.conflist", testenv.BridgeConflist(name, "1.0.0", n, rb.ipam()))
			waitIdle(b, rb.m) // the new directory is an event
			return func() {
				tmp := filepath.Join(rb.dir, "..data_tmp")
				require.NoError(b, os.Symlink(gen, tmp))
				require.NoError(b, os.Rename(tmp, filepath.Join(rb.dir, "..data")))
				require.NoError(b, os.RemoveAll(filepath.Join(rb.dir, old)))
			}, isDefault(rb, name)
		},
	},
	{
		name: "subfolder-plugin",
		layout: func(b *testing.B, rb *reloadBenchManager, initial string) {
			b.Helper()
			testenv.WriteFile(b, rb.dir, "00-new.conflist", initial)
			sub := filepath.Join(rb.dir, "initial")
			require.NoError(b, os.Mkdir(sub, 0o755))
			// One there already, so that portmap's VERSION is not timed.
			testenv.WriteFile(b, sub, "000-portmap.conf", `{"cniVersion":"1.0.0","type":"portmap"}`)
		},
		prepare: func(b *testing.B, rb *reloadBenchManager, _ testenv.Net, _ int) (func(), func() bool) {
			b.Helper()
			rb.n++
			sub := filepath.Join(rb.dir, "initial")
			want := 2 + rb.n // bridge and the first portmap, then one more per change
			rename := stageConfig(b, sub, fmt.Sprintf("%03d-portmap.conf", rb.n), `{"cniVersion":"1.0.0","type":"portmap"}`)
			return rename, func() bool {
				nw := rb.m.e.snapshot().Network("initial")
				return nw != nil && len(nw.List.Plugins) == want
			}
		},
	},
	{
		name: "binary-installed",
		prepare: func(b *testing.B, rb *reloadBenchManager, _ testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name, typ := fmt.Sprintf("new%d", i), fmt.Sprintf("plug%d", i)
			testenv.WriteFile(b, rb.dir, "00-new.conflist", pluginConf(name, "1.0.0", typ))
			settled(b, rb, func() bool { return skippedFile(rb.m, filepath.Join(rb.dir, "00-new.conflist")) != nil })
			tmp := filepath.Join(rb.bin, "."+typ+".tmp")
			copyPlugin(b, tmp, 0o755)
			return func() { require.NoError(b, os.Rename(tmp, filepath.Join(rb.bin, typ))) }, isDefault(rb, name)
		},
	},
	{
		name: "binary-replaced",
		prepare: func(b *testing.B, rb *reloadBenchManager, _ testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			// The old binary supports 0.3.1 only, the config asks for 1.1.0.
			name, plug := fmt.Sprintf("new%d", i), filepath.Join(rb.bin, "swap")
			require.NoError(b, os.WriteFile(plug, []byte("#!/bin/sh\necho '{\"cniVersion\":\"0.3.1\",\"supportedVersions\":[\"0.3.1\"]}'\n"), 0o755))
			testenv.WriteFile(b, rb.dir, "00-new.conflist", pluginConf(name, "1.1.0", "swap"))
			settled(b, rb, func() bool { return skippedFile(rb.m, filepath.Join(rb.dir, "00-new.conflist")) != nil })
			tmp := filepath.Join(rb.bin, ".swap.tmp")
			copyPlugin(b, tmp, 0o755)
			return func() { require.NoError(b, os.Rename(tmp, plug)) }, isDefault(rb, name)
		},
	},
	{
		name: "binary-made-executable",
		prepare: func(b *testing.B, rb *reloadBenchManager, _ testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name, typ := fmt.Sprintf("new%d", i), fmt.Sprintf("exe%d", i)
			plug := filepath.Join(rb.bin, typ)
			copyPlugin(b, plug, 0o644)
			testenv.WriteFile(b, rb.dir, "00-new.conflist", pluginConf(name, "1.0.0", typ))
			settled(b, rb, func() bool { return skippedFile(rb.m, filepath.Join(rb.dir, "00-new.conflist")) != nil })
			return func() { require.NoError(b, os.Chmod(plug, 0o755)) }, isDefault(rb, name)
		},
	},
	{
		name: "conf-dir-recreated",
		prepare: func(b *testing.B, rb *reloadBenchManager, n testenv.Net, i int) (func(), func() bool) {
			b.Helper()
			name := fmt.Sprintf("new%d", i)
			st := rb.m.e.conf.WatchStats()
			require.NoError(b, os.RemoveAll(rb.dir))
			waitReloads(b, rb, st.Leading+st.Trailing+1) // the watcher saw the removal
			waitIdle(b, rb.m)
			return func() {
				require.NoError(b, os.Mkdir(rb.dir, 0o755))
				testenv.WriteFile(b, rb.dir, "00-new.conflist", testenv.BridgeConflist(name, "1.0.0", n, rb.ipam()))
			}, isDefault(rb, name)
		},
	},
}

// BenchmarkReloadVisible measures, with the default debounce, how long
// each kind of config change takes to be in use: from the change (a
// rename, a write, a symlink swap, a binary renamed into a bin dir, ...)
// until the manager publishes the set that holds it. One config besides
// the changed one is in the conf dir (and 50 in a second run of the
// rename). Each iteration starts on a watcher that is idle (no reload due,
// its window over); readying the change and waiting for that are not
// timed. It reports the median and the 99th percentile, and the reloads
// (leading and trailing) per change.
func BenchmarkReloadVisible(b *testing.B) {
	for _, k := range reloadKinds {
		files := []int{1}
		if k.name == "renamed-in" {
			files = []int{1, 50}
		}
		for _, f := range files {
			b.Run(fmt.Sprintf("%s/files=%d", k.name, f), func(b *testing.B) {
				pool := newReloadBenchManagers(b, reloadBenchPool, f, k.layout)
				n := testenv.Alloc(b)
				var took []float64 // ms
				var reloads int64
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					rb := pool[i%len(pool)]
					change, visible := k.prepare(b, rb, n, i)
					waitIdle(b, rb.m)
					st := rb.m.e.conf.WatchStats()
					before := st.Leading + st.Trailing
					b.StartTimer()

					start := time.Now()
					change()
					waitPublished(b, rb.m, visible)
					took = append(took, testenv.Millis(time.Since(start)))

					b.StopTimer()
					waitIdle(b, rb.m)
					st = rb.m.e.conf.WatchStats()
					reloads += st.Leading + st.Trailing - before
					b.StartTimer()
				}
				b.ReportMetric(testenv.Quantile(took, 0.50), "p50-ms")
				b.ReportMetric(testenv.Quantile(took, 0.99), "p99-ms")
				b.ReportMetric(float64(reloads)/float64(len(took)), "reloads/op")
			})
		}
	}
}
