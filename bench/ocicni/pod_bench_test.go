package ocicni_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The pod-path benchmarks run the manager and raw libcni on the same
// configs, with the same plugins, in the same run, and report ratios
// (manager/libcni) next to absolute times. Pairs alternate which side runs
// first, so that neither always gets the warmer caches. BENCHMARKS.md
// holds the figures.

// rawCycle is what a runtime using libcni directly does for one pod:
// ADD every network in order, then DEL them in reverse order.
type rawCycle struct {
	cni   *libcni.CNIConfig
	lists []*libcni.NetworkConfigList
}

func (r *rawCycle) rts(id, nsPath string) []*libcni.RuntimeConf {
	rts := make([]*libcni.RuntimeConf, len(r.lists))
	for i := range rts {
		rts[i] = &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: fmt.Sprintf("eth%d", i)}
	}
	return rts
}

func (r *rawCycle) setUp(ctx context.Context, rts []*libcni.RuntimeConf) error {
	for i, l := range r.lists {
		if _, err := r.cni.AddNetworkList(ctx, l, rts[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *rawCycle) tearDown(ctx context.Context, rts []*libcni.RuntimeConf) error {
	for i := len(r.lists) - 1; i >= 0; i-- {
		if err := r.cni.DelNetworkList(ctx, r.lists[i], rts[i]); err != nil {
			return err
		}
	}
	return nil
}

// podEnv is benchEnv with n bridge networks and the pod that names them.
type podEnv struct {
	*benchEnv
	raw  *rawCycle
	atts []ocicni.NetAttachment
}

func newPodEnv(b *testing.B, networks int) *podEnv {
	b.Helper()
	e := &podEnv{benchEnv: newBenchEnv(b, networks), raw: &rawCycle{}}
	e.raw.cni = e.benchEnv.raw
	for i := range networks {
		name := fmt.Sprintf("bench%d", i)
		data, err := os.ReadFile(filepath.Join(e.confDir, fmt.Sprintf("%02d.conflist", i)))
		require.NoError(b, err)
		l, err := libcni.NetworkConfFromBytes(data)
		require.NoError(b, err)
		e.raw.lists = append(e.raw.lists, l)
		e.atts = append(e.atts, ocicni.NetAttachment{Name: name, Ifname: fmt.Sprintf("eth%d", i)})
	}
	return e
}

// pod returns the manager's request for pod id: the default network with
// one network (as CRI-O asks for most pods), the named ones otherwise.
func (e *podEnv) pod(id, nsPath string) ocicni.PodNetwork {
	pod := ocicni.PodNetwork{ID: id, NetNS: nsPath, Name: id, Namespace: "bench"}
	if len(e.atts) > 1 {
		pod.Networks = e.atts
	}
	return pod
}

// pairTimes are one pod's setup and teardown through each side, and the
// part of each side's cycle spent outside plugin processes.
type pairTimes struct{ rawUp, rawDown, mgrUp, mgrDown, rawOwn, mgrOwn, rawUpPlugins, mgrUpPlugins time.Duration }

func (e *podEnv) pair(b *testing.B, ctx context.Context, i int) pairTimes {
	b.Helper()
	// Each side gets a fresh netns of its own: what one side's DEL leaves
	// for the kernel to finish must not slow the other side. They are
	// removed when the benchmark ends, since the kernel dismantles a
	// removed netns in the background and would slow the next pair.
	rawNS, mgrNS := testenv.NewNS(b), testenv.NewNS(b)
	var t pairTimes
	runRaw := func() {
		rts := e.raw.rts(fmt.Sprintf("raw%d", i), rawNS)
		plugins := e.rawPlugins.total()
		start := time.Now()
		require.NoError(b, e.raw.setUp(ctx, rts))
		t.rawUp = time.Since(start)
		t.rawUpPlugins = e.rawPlugins.total() - plugins
		start = time.Now()
		require.NoError(b, e.raw.tearDown(ctx, rts))
		t.rawDown = time.Since(start)
		t.rawOwn = t.rawUp + t.rawDown - (e.rawPlugins.total() - plugins)
	}
	runMgr := func() {
		pod := e.pod(fmt.Sprintf("mgr%d", i), mgrNS)
		plugins := e.mgrPlugins.total()
		start := time.Now()
		_, err := e.m.SetUpPodWithContext(ctx, pod)
		require.NoError(b, err)
		t.mgrUp = time.Since(start)
		t.mgrUpPlugins = e.mgrPlugins.total() - plugins
		start = time.Now()
		require.NoError(b, e.m.TearDownPodWithContext(ctx, pod))
		t.mgrDown = time.Since(start)
		t.mgrOwn = t.mgrUp + t.mgrDown - (e.mgrPlugins.total() - plugins)
	}
	if i%2 == 0 {
		runRaw()
		runMgr()
	} else {
		runMgr()
		runRaw()
	}
	return t
}

func newBenchNetNS(b *testing.B) string {
	b.Helper()
	p, err := netns.New()
	require.NoError(b, err)
	return p
}

func removeBenchNetNS(b *testing.B, paths ...string) {
	b.Helper()
	for _, p := range paths {
		require.NoError(b, netns.Remove(p))
	}
}

// BenchmarkPodVsLibcni times each pod's setup and teardown through the
// manager and through raw libcni, paired, with 1 and 3 bridge networks. It
// reports the median of the per-pod ratios of the whole cycle (and of
// setup and teardown alone), and the ratio of the two sides' 95th
// percentiles.
func BenchmarkPodVsLibcni(b *testing.B) {
	for _, networks := range []int{1, 3} {
		b.Run(fmt.Sprintf("networks=%d", networks), func(b *testing.B) {
			e := newPodEnv(b, networks)
			ctx := context.Background()
			var raw, mgr, cycle, up, down, rawOwn, mgrOwn, rawUp, mgrUp, rawUpPlugins, mgrUpPlugins []float64
			for i := 0; b.Loop(); i++ {
				t := e.pair(b, ctx, i)
				rawUp, mgrUp = append(rawUp, testenv.Millis(t.rawUp)), append(mgrUp, testenv.Millis(t.mgrUp))
				rawUpPlugins = append(rawUpPlugins, testenv.Millis(t.rawUpPlugins))
				mgrUpPlugins = append(mgrUpPlugins, testenv.Millis(t.mgrUpPlugins))
				r, m := t.rawUp+t.rawDown, t.mgrUp+t.mgrDown
				raw, mgr = append(raw, testenv.Millis(r)), append(mgr, testenv.Millis(m))
				cycle = append(cycle, float64(m)/float64(r))
				up = append(up, float64(t.mgrUp)/float64(t.rawUp))
				down = append(down, float64(t.mgrDown)/float64(t.rawDown))
				rawOwn, mgrOwn = append(rawOwn, testenv.Millis(t.rawOwn)), append(mgrOwn, testenv.Millis(t.mgrOwn))
			}
			b.ReportMetric(testenv.Quantile(cycle, 0.5), "median-ratio")
			// Setup alone, and the part of it that its plugin runs took
			// (the manager's first run includes the wait for its config).
			b.ReportMetric(testenv.Quantile(rawUp, 0.5), "libcni-setup-ms")
			b.ReportMetric(testenv.Quantile(mgrUp, 0.5), "ocicni-setup-ms")
			b.ReportMetric(testenv.Quantile(rawUpPlugins, 0.5), "libcni-setup-plugins-ms")
			b.ReportMetric(testenv.Quantile(mgrUpPlugins, 0.5), "ocicni-setup-plugins-ms")
			b.ReportMetric(testenv.Quantile(mgr, 0.95)/testenv.Quantile(raw, 0.95), "p95-ratio")
			b.ReportMetric(testenv.Quantile(up, 0.5), "setup-ratio")
			b.ReportMetric(testenv.Quantile(down, 0.5), "teardown-ratio")
			b.ReportMetric(testenv.Quantile(raw, 0.5), "libcni-ms")
			b.ReportMetric(testenv.Quantile(mgr, 0.5), "ocicni-ms")
			b.ReportMetric(testenv.Quantile(raw, 0.95), "libcni-p95-ms")
			b.ReportMetric(testenv.Quantile(mgr, 0.95), "ocicni-p95-ms")
			// Outside plugin processes: libcni's own work (config
			// injection, its result cache) on both sides, and the
			// manager's on top of it.
			b.ReportMetric(testenv.Quantile(rawOwn, 0.5), "libcni-own-ms")
			b.ReportMetric(testenv.Quantile(mgrOwn, 0.5), "ocicni-own-ms")
		})
	}
}

// BenchmarkThroughput runs pod setup+teardown from 1, 2 and 8 workers, as
// a runtime does under load, on 1 and 3 bridge networks, through raw
// libcni and through the manager on the same configs. Every iteration runs
// one round of each side, in alternating order, of podsPerWorker pods per
// worker; it reports pods per second of each side over all rounds, their
// ratio (total-ratio), and the median of the rounds' ratios
// (throughput-ratio); for both, manager over libcni, higher is better. It
// also reports each side's CPU time per pod, its own and its plugins'.
func BenchmarkThroughput(b *testing.B) {
	for _, networks := range []int{1, 3} {
		for _, workers := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("networks=%d/workers=%d", networks, workers), func(b *testing.B) {
				benchThroughput(b, networks, workers)
			})
		}
	}
}

func benchThroughput(b *testing.B, networks, workers int) {
	b.Helper()
	const podsPerWorker = 3
	e := newPodEnv(b, networks)
	ctx := context.Background()
	nss := make([]string, workers)
	for w := range nss {
		nss[w] = testenv.NewNS(b)
	}
	// round runs one round of a side and returns how long it took and
	// the CPU time it used.
	round := func(pod func(w, i int) error) (time.Duration, testenv.CPUTime) {
		cpu := testenv.CPUNow(b)
		took, err := testenv.RunWorkers(workers, podsPerWorker, pod)
		require.NoError(b, err)
		return took, testenv.CPUNow(b).Sub(cpu)
	}
	rawPod := func(r int) func(w, i int) error {
		return func(w, i int) error {
			rts := e.raw.rts(fmt.Sprintf("raw%d-%d-%d", r, w, i), nss[w])
			if err := e.raw.setUp(ctx, rts); err != nil {
				return err
			}
			return e.raw.tearDown(ctx, rts)
		}
	}
	mgrPod := func(r int) func(w, i int) error {
		return func(w, i int) error {
			pod := e.pod(fmt.Sprintf("mgr%d-%d-%d", r, w, i), nss[w])
			if _, err := e.m.SetUpPodWithContext(ctx, pod); err != nil {
				return err
			}
			return e.m.TearDownPodWithContext(ctx, pod)
		}
	}
	var rawTotal, mgrTotal time.Duration
	var rawCPU, mgrCPU testenv.CPUTime
	var ratios []float64
	rounds := 0
	for ; b.Loop(); rounds++ {
		var r, m time.Duration
		var rc, mc testenv.CPUTime
		if rounds%2 == 0 {
			r, rc = round(rawPod(rounds))
			m, mc = round(mgrPod(rounds))
		} else {
			m, mc = round(mgrPod(rounds))
			r, rc = round(rawPod(rounds))
		}
		rawTotal, mgrTotal = rawTotal+r, mgrTotal+m
		rawCPU, mgrCPU = rawCPU.Add(rc), mgrCPU.Add(mc)
		ratios = append(ratios, float64(r)/float64(m))
	}
	pods := float64(rounds * workers * podsPerWorker)
	b.ReportMetric(pods/rawTotal.Seconds(), "libcni-pods/s")
	b.ReportMetric(pods/mgrTotal.Seconds(), "ocicni-pods/s")
	b.ReportMetric(float64(rawTotal)/float64(mgrTotal), "total-ratio")
	// The median of the paired rounds' ratios, which one slow
	// round (a loaded machine) does not move.
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "throughput-ratio")
	// CPU per pod: the process's own (libcni's work, and the
	// manager's on top of it) and its plugins'.
	b.ReportMetric(testenv.Millis(rawCPU.Self)/pods, "libcni-cpu-ms/pod")
	b.ReportMetric(testenv.Millis(mgrCPU.Self)/pods, "ocicni-cpu-ms/pod")
	b.ReportMetric(testenv.Millis(rawCPU.Children)/pods, "libcni-plugins-cpu-ms/pod")
	b.ReportMetric(testenv.Millis(mgrCPU.Children)/pods, "ocicni-plugins-cpu-ms/pod")
}

// BenchmarkTeardownFailingMiddle tears down pods on three networks, the
// middle one a recorder plugin, and compares a teardown whose middle DEL
// fails (code 11) with a clean one of the same networks, paired. Both run
// the same plugins; the difference is the manager's failure handling (the
// error, its log line, the order record kept for the failed attachment).
func BenchmarkTeardownFailingMiddle(b *testing.B) {
	testenv.RequireRoot(b)
	dir := b.TempDir()
	confDir := filepath.Join(dir, "net.d")
	require.NoError(b, os.MkdirAll(confDir, 0o755))
	failFlag := filepath.Join(dir, "fail-del")
	for i, name := range []string{"first", "", "last"} {
		if name == "" {
			testenv.WriteFile(b, confDir, "01.conflist", testenv.Conflist("middle", "1.0.0",
				testenv.RecorderConf("middle", "1.0.0", "", map[string]any{
					"del": map[string]any{"errorCode": 11, "errorMsg": "injected", "onlyIfExists": failFlag},
				})))
			continue
		}
		testenv.WriteFile(b, confDir, fmt.Sprintf("%02d.conflist", i),
			testenv.BridgeConflist(name, "1.0.0", testenv.Alloc(b), filepath.Join(dir, "ipam")))
	}
	m := newQuietManager(b, confDir, filepath.Join(dir, "cache"))
	ctx := context.Background()
	atts := []ocicni.NetAttachment{{Name: "first", Ifname: "eth0"}, {Name: "middle", Ifname: "eth1"}, {Name: "last", Ifname: "eth2"}}
	var clean, failing, ratios []float64
	for i := 0; b.Loop(); i++ {
		nsPath, err := netns.New()
		require.NoError(b, err)
		ok := ocicni.PodNetwork{ID: fmt.Sprintf("clean%d", i), NetNS: nsPath, Name: "clean", Namespace: "bench", Networks: atts}
		bad := ocicni.PodNetwork{ID: fmt.Sprintf("fail%d", i), NetNS: nsPath, Name: "fail", Namespace: "bench", Networks: atts}
		_, err = m.SetUpPodWithContext(ctx, ok)
		require.NoError(b, err)
		// The second pod's interfaces go in a second netns: same names.
		nsBad, err := netns.New()
		require.NoError(b, err)
		bad.NetNS = nsBad
		_, err = m.SetUpPodWithContext(ctx, bad)
		require.NoError(b, err)

		var tc, tf time.Duration
		runClean := func() {
			start := time.Now()
			require.NoError(b, m.TearDownPodWithContext(ctx, ok))
			tc = time.Since(start)
		}
		runFailing := func() {
			require.NoError(b, os.WriteFile(failFlag, nil, 0o600))
			start := time.Now()
			err := m.TearDownPodWithContext(ctx, bad)
			tf = time.Since(start)
			require.ErrorContains(b, err, "injected")
			require.NoError(b, os.Remove(failFlag))
		}
		if i%2 == 0 {
			runClean()
			runFailing()
		} else {
			runFailing()
			runClean()
		}
		require.NoError(b, m.TearDownPodWithContext(ctx, bad), "the retry cleans up")
		require.NoError(b, netns.Remove(nsPath))
		require.NoError(b, netns.Remove(nsBad))
		clean, failing = append(clean, testenv.Millis(tc)), append(failing, testenv.Millis(tf))
		ratios = append(ratios, float64(tf)/float64(tc))
	}
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "median-ratio")
	b.ReportMetric(testenv.Quantile(clean, 0.5), "clean-ms")
	b.ReportMetric(testenv.Quantile(failing, 0.5), "failing-ms")
}
