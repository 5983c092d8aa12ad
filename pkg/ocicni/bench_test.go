package ocicni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// benchEnv holds one bridge network used by both the manager and raw
// libcni, so that both run the same plugins on the same config.
type benchEnv struct {
	confDir, cacheDir string
	list              *libcni.NetworkConfigList
	m                 *Manager
	raw               *libcni.CNIConfig
}

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
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := New(WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir),
		WithoutWatcher(), WithLogger(logrus.NewEntry(logger)))
	require.NoError(b, err)
	b.Cleanup(func() { _ = m.Shutdown() })
	e.m = m
	e.raw = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, filepath.Join(dir, "rawcache"), nil)
	return e
}

// BenchmarkSetUpTearDownVsLibcni times one pod's setup and teardown through
// the manager and through raw libcni on the same bridge config, back to
// back in every iteration, and reports the median of the per-pod ratios
// (manager/libcni), which cancels the machine's drift.
func BenchmarkSetUpTearDownVsLibcni(b *testing.B) {
	e := newBenchEnv(b, 1)
	ctx := context.Background()
	var ratios []float64
	var rawTotal, mgrTotal time.Duration
	for i := 0; b.Loop(); i++ {
		nsPath, err := netns.New()
		require.NoError(b, err)

		id := fmt.Sprintf("rawbench%d", i)
		rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: "eth0"}
		start := time.Now()
		_, err = e.raw.AddNetworkList(ctx, e.list, rt)
		require.NoError(b, err)
		require.NoError(b, e.raw.DelNetworkList(ctx, e.list, rt))
		raw := time.Since(start)

		pod := PodNetwork{ID: fmt.Sprintf("mgrbench%d", i), NetNS: nsPath, Name: "bench", Namespace: "bench"}
		start = time.Now()
		_, err = e.m.SetUpPodWithContext(ctx, pod)
		require.NoError(b, err)
		require.NoError(b, e.m.TearDownPodWithContext(ctx, pod))
		mgr := time.Since(start)

		require.NoError(b, netns.Remove(nsPath))
		ratios = append(ratios, float64(mgr)/float64(raw))
		rawTotal += raw
		mgrTotal += mgr
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
	b.ReportMetric(float64(rawTotal.Microseconds())/float64(len(ratios))/1000, "libcni-ms/pod")
	b.ReportMetric(float64(mgrTotal.Microseconds())/float64(len(ratios))/1000, "ocicni-ms/pod")
}

// BenchmarkThroughput8Workers runs pod setup+teardown from 8 workers, as a
// runtime does under load, through raw libcni and through the manager on
// the same config, and reports pods per second for each.
func BenchmarkThroughput8Workers(b *testing.B) {
	e := newBenchEnv(b, 1)
	ctx := context.Background()
	const workers = 8
	run := func(b *testing.B, pod func(w, i int, nsPath string) error) {
		b.Helper()
		nss := make([]string, workers)
		for w := range nss {
			p, err := netns.New()
			require.NoError(b, err)
			nss[w] = p
			b.Cleanup(func() { _ = netns.Remove(p) })
		}
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		per := max(b.N/workers, 1)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					if err := pod(w, i, nss[w]); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(per*workers)/time.Since(start).Seconds(), "pods/s")
	}
	b.Run("libcni", func(b *testing.B) {
		run(b, func(w, i int, nsPath string) error {
			rt := &libcni.RuntimeConf{ContainerID: fmt.Sprintf("raw%d-%d-%d", b.N, w, i), NetNS: nsPath, IfName: "eth0"}
			if _, err := e.raw.AddNetworkList(ctx, e.list, rt); err != nil {
				return err
			}
			return e.raw.DelNetworkList(ctx, e.list, rt)
		})
	})
	b.Run("ocicni", func(b *testing.B) {
		run(b, func(w, i int, nsPath string) error {
			pod := PodNetwork{ID: fmt.Sprintf("mgr%d-%d-%d", b.N, w, i), NetNS: nsPath, Name: "bench", Namespace: "bench"}
			if _, err := e.m.SetUpPodWithContext(ctx, pod); err != nil {
				return err
			}
			return e.m.TearDownPodWithContext(ctx, pod)
		})
	})
}
