package ocicni_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The burst benchmarks release N sandboxes' setups at the same instant,
// as a node does after a restart or a scale-up, and then their teardowns,
// through raw libcni (every ADD at once, as runtimes run them) and
// through managers on the same bridge network, in the same round, in
// rotating order. Each operation's latency counts from the release.

// burstSide is one way of setting up and tearing down a pod.
type burstSide struct {
	name string
	up   func(ctx context.Context, id, nsPath string) error
	down func(ctx context.Context, id, nsPath string) error
}

// burstTimes are one side's latencies in one round, from the release of
// the burst, and the makespans (the last latency).
type burstTimes struct {
	up, down         []float64 // ms
	upSpan, downSpan float64
}

// fire releases n calls of op at the same instant and returns their
// latencies in ms, measured from that instant, and the makespan.
func fire(b *testing.B, n int, op func(i int) error) ([]float64, float64) {
	b.Helper()
	release := make(chan struct{})
	var ready, done sync.WaitGroup
	lat := make([]float64, n)
	errs := make([]error, n)
	var start time.Time
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-release
			errs[i] = op(i)
			lat[i] = testenv.Millis(time.Since(start))
		}()
	}
	ready.Wait()
	start = time.Now()
	close(release)
	done.Wait()
	for _, err := range errs {
		require.NoError(b, err)
	}
	return lat, testenv.Quantile(lat, 1)
}

// round runs one burst of n pods through side s, in fresh netns.
func (s *burstSide) round(b *testing.B, ctx context.Context, n, r int) burstTimes {
	b.Helper()
	nss := make([]string, n)
	for i := range nss {
		nss[i] = newBenchNetNS(b)
	}
	defer removeBenchNetNS(b, nss...)
	id := func(i int) string { return fmt.Sprintf("%s-%d-%d", s.name, r, i) }
	var t burstTimes
	t.up, t.upSpan = fire(b, n, func(i int) error { return s.up(ctx, id(i), nss[i]) })
	t.down, t.downSpan = fire(b, n, func(i int) error { return s.down(ctx, id(i), nss[i]) })
	return t
}

// burstSides returns the sides: raw libcni and managers with the given
// admissions, all on the bench env's one bridge network.
func burstSides(b *testing.B, e *benchEnv, admissions map[string][]ocicni.Option) []*burstSide {
	b.Helper()
	raw := &rawCycle{cni: e.raw, lists: []*libcni.NetworkConfigList{e.list}}
	sides := []*burstSide{{
		name: "libcni",
		up:   func(ctx context.Context, id, ns string) error { return raw.setUp(ctx, raw.rts(id, ns)) },
		down: func(ctx context.Context, id, ns string) error { return raw.tearDown(ctx, raw.rts(id, ns)) },
	}}
	for name, opts := range admissions {
		m := newQuietManager(b, e.confDir, b.TempDir(), opts...)
		pod := func(id, ns string) ocicni.PodNetwork {
			return ocicni.PodNetwork{ID: id, NetNS: ns, Name: id, Namespace: "bench"}
		}
		sides = append(sides, &burstSide{
			name: name,
			up: func(ctx context.Context, id, ns string) error {
				_, err := m.SetUpPodWithContext(ctx, pod(id, ns))
				return err
			},
			down: func(ctx context.Context, id, ns string) error { return m.TearDownPodWithContext(ctx, pod(id, ns)) },
		})
	}
	return sides
}

// runBursts runs rounds of n-pod bursts through every side, rotating which
// goes first, and reports, for each manager side, the medians over the
// rounds of its p50, p99 and makespan ratios to raw libcni's, for setup
// and for teardown, next to libcni's own figures.
func runBursts(b *testing.B, sides []*burstSide, n int) {
	b.Helper()
	ctx := context.Background()
	ratios := map[string][]float64{}
	var raw []burstTimes
	for r := 0; b.Loop(); r++ {
		got := make([]burstTimes, len(sides))
		for k := range sides {
			i := (k + r) % len(sides)
			got[i] = sides[i].round(b, ctx, n, r)
		}
		raw = append(raw, got[0])
		for i, s := range sides[1:] {
			m, l := got[i+1], got[0]
			for _, q := range []struct {
				name      string
				mine, lib float64
			}{
				{"setup-p50", testenv.Quantile(m.up, 0.5), testenv.Quantile(l.up, 0.5)},
				{"setup-p99", testenv.Quantile(m.up, 0.99), testenv.Quantile(l.up, 0.99)},
				{"setup-span", m.upSpan, l.upSpan},
				{"teardown-p50", testenv.Quantile(m.down, 0.5), testenv.Quantile(l.down, 0.5)},
				{"teardown-p99", testenv.Quantile(m.down, 0.99), testenv.Quantile(l.down, 0.99)},
				{"teardown-span", m.downSpan, l.downSpan},
			} {
				key := s.name + "-" + q.name
				ratios[key] = append(ratios[key], q.mine/q.lib)
			}
		}
	}
	for key, xs := range ratios {
		b.ReportMetric(testenv.Quantile(xs, 0.5), key+"-ratio")
	}
	med := func(f func(t burstTimes) float64) float64 {
		xs := make([]float64, len(raw))
		for i, t := range raw {
			xs[i] = f(t)
		}
		return testenv.Quantile(xs, 0.5)
	}
	b.ReportMetric(med(func(t burstTimes) float64 { return testenv.Quantile(t.up, 0.5) }), "libcni-setup-p50-ms")
	b.ReportMetric(med(func(t burstTimes) float64 { return t.upSpan }), "libcni-setup-span-ms")
	b.ReportMetric(med(func(t burstTimes) float64 { return t.downSpan }), "libcni-teardown-span-ms")
}

// BenchmarkBurst releases 20, 40 and 80 sandboxes at once through raw
// libcni, through a manager with its default admission ("on") and through
// one without admission ("off"). BENCHMARKS.md, "Bursts", holds the
// figures and the targets.
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{20, 40, 80} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, 1)
			runBursts(b, burstSides(b, e, map[string][]ocicni.Option{
				"on":  nil,
				"off": {ocicni.WithoutAdmission()},
			}), n)
		})
	}
}

// BenchmarkBurstBounds sets the admission's bounds to 1, 2 and 4 per CPU
// (and teardown's to 8 per CPU), one manager each, against raw libcni on
// bursts of 40 and 80, to choose the defaults. BURST_BOUNDS_ONLY=setup or
// teardown varies one bound alone, the other left unbounded.
func BenchmarkBurstBounds(b *testing.B) {
	cpus := runtime.GOMAXPROCS(0)
	only := os.Getenv("BURST_BOUNDS_ONLY")
	for _, n := range []int{40, 80} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			e := newBenchEnv(b, 1)
			sides := map[string][]ocicni.Option{}
			for _, per := range []int{1, 2, 4, 8} {
				a := ocicni.Admission{Setup: per * cpus, Teardown: per * cpus}
				switch {
				case only == "setup":
					a.Teardown = ocicni.Unbounded
				case only == "teardown":
					a.Setup = ocicni.Unbounded
				case per == 8:
					continue
				}
				sides[fmt.Sprintf("x%d", per)] = []ocicni.Option{ocicni.WithAdmission(a)}
			}
			runBursts(b, burstSides(b, e, sides), n)
		})
	}
}

// BenchmarkSequentialAdmission runs single pods, one at a time, through a
// manager with its default admission and one without, paired and in
// alternating order, and reports the median of the per-pod ratios
// (on/off) of the whole cycle: what admitting costs a pod that never
// waits.
func BenchmarkSequentialAdmission(b *testing.B) {
	e := newBenchEnv(b, 1)
	sides := burstSides(b, e, map[string][]ocicni.Option{"on": nil, "off": {ocicni.WithoutAdmission()}})
	byName := map[string]*burstSide{}
	for _, s := range sides {
		byName[s.name] = s
	}
	ctx := context.Background()
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		took := map[string]time.Duration{}
		order := []string{"on", "off"}
		if i%2 == 1 {
			order = []string{"off", "on"}
		}
		for _, name := range order {
			ns := newBenchNetNS(b)
			id := fmt.Sprintf("seq-%s-%d", name, i)
			start := time.Now()
			require.NoError(b, byName[name].up(ctx, id, ns))
			require.NoError(b, byName[name].down(ctx, id, ns))
			took[name] = time.Since(start)
			removeBenchNetNS(b, ns)
		}
		ratios = append(ratios, float64(took["on"])/float64(took["off"]))
	}
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "on/off-median-ratio")
}
