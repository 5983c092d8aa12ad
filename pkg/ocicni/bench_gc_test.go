package ocicni

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// hook counts the plugin runs of GC (its DELs and its GC verbs; the setups
// on gcsetup are left out) by verb and plugin type.
func (e *gcBenchEnv) hook(_ context.Context, r PluginRun) {
	if r.Network == "gcsetup" && r.Verb != "GC" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.Verb == "GC" && e.firstVerb.IsZero() {
		e.firstVerb = time.Now().Add(-r.Duration)
	}
	k := r.Verb + " " + r.Plugin
	if e.execs[k] == nil {
		e.execs[k] = &execStat{}
	}
	e.execs[k].n++
	e.execs[k].total += r.Duration
}

// podCycle sets a fresh pod up and tears it down on gcsetup, and returns
// how long the setup took. The pod is live, that is among the pods a GC
// that starts meanwhile takes as valid, from before its setup until its
// teardown returns.
func (e *gcBenchEnv) podCycle(ctx context.Context, w, i int, tag string) (time.Duration, error) {
	pod := &PodNetwork{
		ID: fmt.Sprintf("gcsetup-%s-%d-%d", tag, w, i), Name: "setup", Namespace: "bench", NetNS: e.nss[w],
		Networks: []NetAttachment{{Name: "gcsetup"}},
	}
	listed := *pod // GC reads it while this goroutine changes pod
	e.mu.Lock()
	e.live[pod.ID] = &listed
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.live, pod.ID)
		e.mu.Unlock()
	}()
	start := time.Now()
	if _, err := e.m.SetUpPodWithContext(ctx, *pod); err != nil {
		return 0, fmt.Errorf("setup %s: %w", pod.ID, err)
	}
	took := time.Since(start)
	pod.Networks = nil
	if err := e.m.TearDownPodWithContext(ctx, *pod); err != nil {
		return took, fmt.Errorf("teardown %s: %w", pod.ID, err)
	}
	return took, nil
}

// gcPhase is a stretch of GC during which its DEL workers either go on
// or are held (see benchGCHold).
type gcPhase struct {
	seq  int
	held bool
}

// setupTimes collects the setup latencies of gcWithSetups by phase.
type setupTimes struct {
	mu           sync.Mutex // guards the four below
	during, base []time.Duration
	phase        gcPhase
	running      bool          // GC is under way
	counted      chan struct{} // a setup was counted; buffered, 1
}

func (s *setupTimes) current() gcPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase
}

// add counts a setup that began in phase before, if GC still runs and the
// phase has not changed since.
func (s *setupTimes) add(before gcPhase, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running || s.phase != before {
		return
	}
	if before.held {
		s.base = append(s.base, took)
	} else {
		s.during = append(s.during, took)
	}
	select {
	case s.counted <- struct{}{}:
	default:
	}
}

func (s *setupTimes) setRunning(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = r
}

func (s *setupTimes) setPhase(held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = gcPhase{seq: s.phase.seq + 1, held: held}
}

func (s *setupTimes) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.during) + len(s.base)
}

// waitFor waits until n more setups are counted, and reports false if
// done closes first.
func (s *setupTimes) waitFor(n int, done <-chan struct{}) bool {
	for from := s.total(); s.total()-from < n; {
		select {
		case <-s.counted:
		case <-done:
			return false
		}
	}
	return true
}

// alternate holds GC's DEL workers for every gcBenchBaseBlock setups
// after gcBenchDuringBlock setups with them going, until done closes.
func (s *setupTimes) alternate(h *benchGCHold, done <-chan struct{}) {
	defer h.release()
	for s.waitFor(gcBenchDuringBlock, done) {
		h.hold()
		s.setPhase(true)
		ok := s.waitFor(gcBenchBaseBlock, done)
		h.release()
		s.setPhase(false)
		if !ok {
			return
		}
	}
}

// gcWithSetups runs GC with the valid synthetic pods and the live setup
// pods, while the setup workers keep going, and returns GC's duration and
// the latencies of the setups that ran while GC's DEL workers went on
// (during) and while they were held (base). The two alternate in blocks
// (see gcBenchDuringBlock); a setup whose pod cycle spans a change of
// phase counts for neither.
func (e *gcBenchEnv) gcWithSetups(ctx context.Context) (time.Duration, []time.Duration, []time.Duration) {
	times := &setupTimes{counted: make(chan struct{}, 1)}
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		started = make(chan struct{}, gcBenchSetupWorkers)
	)
	for w := range gcBenchSetupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				before := times.current()
				took, err := e.podCycle(ctx, w, i, "gc")
				if err != nil {
					e.b.Error(err)
					return
				}
				times.add(before, took)
			}
		}()
	}
	for range gcBenchSetupWorkers {
		<-started
	}
	e.mu.Lock()
	valid := slices.Clone(e.valid)
	for _, p := range e.live {
		valid = append(valid, p)
	}
	clear(e.execs)
	e.mu.Unlock()

	gcDone, alternated := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(alternated)
		times.alternate(e.hold, gcDone)
	}()
	times.setPhase(false) // setups begun before GC count for neither side
	times.setRunning(true)
	start := time.Now()
	err := e.m.GC(withGCHold(ctx, e.hold), valid)
	took := time.Since(start)
	times.setRunning(false)
	close(gcDone)
	<-alternated
	close(stop)
	wg.Wait()
	require.NoError(e.b, err)
	return took, times.during, times.base
}

// check asserts that GC released exactly the stale reservations and
// entries, and kept the valid ones.
func (e *gcBenchEnv) check() {
	e.b.Helper()
	left := testenv.Reservations(e.b, e.dataDir, e.layout.valid.name)
	if e.layout.stale.name != e.layout.valid.name {
		require.Empty(e.b, testenv.Reservations(e.b, e.dataDir, e.layout.stale.name), "stale reservations left")
	}
	want := slices.Clone(e.validIPs)
	slices.SortFunc(want, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	slices.SortFunc(left, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	require.Equal(e.b, want, left, "the 9,000 valid reservations remain and the 1,000 stale ones are released")
	listing, err := e.m.diskCache().List()
	require.NoError(e.b, err)
	require.Len(e.b, listing.Entries, gcBenchEntries-gcBenchStale, "cache entries left")
	require.Empty(e.b, listing.Corrupt)
	ids, err := e.m.diskCache().ListOrders()
	require.NoError(e.b, err)
	require.Len(e.b, ids, gcBenchEntries-gcBenchStale, "order records left")
}

func percentile(ds []time.Duration, p float64) float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = testenv.Millis(d)
	}
	return testenv.Quantile(xs, p)
}

// BenchmarkGC10000 runs GC over 10,000 cache entries of CNI 1.1.0 bridge
// networks (9,000 valid pods and 1,000 stale ones, whose netns are gone)
// with real plugins, while two workers set pods up and tear them down on
// another bridge network. It reports GC's wall time (and, of it, the time
// planning takes on its own), its exec floor (its plugin runs, each at the
// cost of one run of the same plugin alone; see sampleDELs) and the ratio
// of the two, and the setup latency with GC's DELs going and, as the
// baseline, with them held, in alternating blocks while the same GC runs
// (see gcWithSetups), and logs how GC's plugin runs were spent. GC during
// setups runs longer than GC alone by the time it is held.
//
// "onenet" is the layout of the issue, every attachment on one network:
// there host-local's DEL, which walks its whole store under its lock,
// bounds GC's time. "split" puts the stale attachments on a network of
// their own and varies [WithGCWorkers]. Run one with, for example,
// -bench 'BenchmarkGC10000/split/workers=4' -benchtime 1x. With
// OCICNI_BENCH_GC_ALONE set it times only GC on its own, which takes a
// fraction of the time of GC during setups, for comparing commits in
// alternating runs.
func BenchmarkGC10000(b *testing.B) {
	testenv.RequireRoot(b)
	require.NotEmpty(b, pluginDir, "plugins are built by TestMain")
	setupNet := testenv.Alloc(b)
	for _, tc := range []struct {
		layout  gcBenchLayout
		workers []int
	}{
		{gcBenchSplit, []int{1, 2, 4, 8}},
		{gcBenchOneNet, []int{defaultGCWorkers()}},
	} {
		for _, workers := range tc.workers {
			b.Run(fmt.Sprintf("%s/workers=%d", tc.layout.name, workers), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					benchGCOnce(b, tc.layout, setupNet, workers)
				}
			})
		}
	}
}

// benchGCOnce times one GC on its own, and then, on fresh copies of the
// same entries, one GC while the setup workers keep setting pods up,
// held now and then for the baseline. The timer is stopped on entry; it
// runs only for the GC on its own.
func benchGCOnce(b *testing.B, layout gcBenchLayout, setupNet testenv.Net, workers int) {
	b.Helper()
	ctx := context.Background()
	e := newGCBenchEnv(b, layout, setupNet, workers)
	start := time.Now()
	watch := e.m.e.setups.watch()
	planned, _ := e.m.gc.planGC(e.valid, e.m.e.snapshot(), watch, e.m.e.log)
	plan := time.Since(start)
	watch.stop()
	require.Len(b, planned.stale, gcBenchStale)
	perExec := e.sampleDELs(ctx, gcFloorSample)
	b.StartTimer()
	start = time.Now()
	require.NoError(b, e.m.GC(ctx, e.valid))
	alone := time.Since(start)
	b.Logf("GC alone: %d ms (%d stale sandboxes)", alone.Milliseconds(), gcBenchStale)
	b.StopTimer()
	e.check()
	e.logExecs(b, "GC alone")
	floor := e.floor(perExec)
	if os.Getenv("OCICNI_BENCH_GC_ALONE") != "" {
		b.ReportMetric(float64(alone.Milliseconds()), "gc-ms")
		b.ReportMetric(float64(floor.Milliseconds()), "floor-ms")
		b.ReportMetric(float64(alone)/float64(floor), "gc/floor")
		return
	}

	e = newGCBenchEnv(b, layout, setupNet, workers)
	busy, during, base := e.gcWithSetups(ctx)
	e.check()
	e.logExecs(b, "GC during setups")
	b.ReportMetric(float64(alone.Milliseconds()), "gc-ms")
	b.ReportMetric(float64(floor.Milliseconds()), "floor-ms")
	b.ReportMetric(float64(alone)/float64(floor), "gc/floor")
	b.ReportMetric(float64(plan.Milliseconds()), "plan-ms")
	b.ReportMetric(float64(busy.Milliseconds()), "gc-busy-ms")
	reportLatencies(b, base, during)
}

// gcFloorSample is how many stale sandboxes are torn down one at a time,
// before GC, to time one exec of each of their plugins.
const gcFloorSample = 20

// sampleDELs tears down n stale sandboxes one after the other, as a
// runtime would, and returns the mean duration of one run of each of
// their plugins, by "VERB plugin": what one exec costs on this machine
// when nothing else runs. GC then has n fewer stale sandboxes.
func (e *gcBenchEnv) sampleDELs(ctx context.Context, n int) map[string]time.Duration {
	e.b.Helper()
	e.mu.Lock()
	clear(e.execs)
	e.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("gcbench%08x", gcBenchEntries-gcBenchStale+i)
		require.NoError(e.b, e.m.TearDownPodWithContext(ctx, PodNetwork{ID: id, Name: id, Namespace: "bench"}))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]time.Duration{}
	for k, st := range e.execs {
		out[k] = st.total / time.Duration(st.n)
	}
	clear(e.execs)
	return out
}

// floor is the exec floor of the last GC: each of its DEL runs at the cost
// of one run of the same plugin alone (perExec), plus its GC verbs as they
// ran (one at a time already, with pods excluded).
func (e *gcBenchEnv) floor(perExec map[string]time.Duration) time.Duration {
	e.b.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var floor time.Duration
	for k, st := range e.execs {
		if c, ok := perExec[k]; ok && strings.HasPrefix(k, "DEL ") {
			floor += time.Duration(st.n) * c
			continue
		}
		floor += st.total
	}
	return floor
}

// reportLatencies reports the setup latencies with GC held (base) and of
// the setups that started during GC, and their ratios.
func reportLatencies(b *testing.B, base, during []time.Duration) {
	b.Helper()
	b.ReportMetric(percentile(base, 0.5), "setup-p50-ms")
	b.ReportMetric(percentile(base, 0.99), "setup-p99-ms")
	b.ReportMetric(percentile(during, 0.5), "gc-setup-p50-ms")
	b.ReportMetric(percentile(during, 0.99), "gc-setup-p99-ms")
	b.ReportMetric(float64(len(during)), "setups-during-gc")
	b.ReportMetric(float64(len(base)), "setups-base")
	if p := percentile(base, 0.5); p > 0 {
		b.ReportMetric(percentile(during, 0.5)/p, "p50-ratio")
	}
	if p := percentile(base, 0.99); p > 0 {
		b.ReportMetric(percentile(during, 0.99)/p, "p99-ratio")
	}
}

// logExecs logs the plugin runs of the last GC, by verb and plugin type.
func (e *gcBenchEnv) logExecs(b *testing.B, what string) {
	b.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(e.execs)) {
		s := e.execs[k]
		b.Logf("%s: %-15s %5d runs, %6.1f ms each, %7.0f ms in all", what, k, s.n,
			float64(s.total.Microseconds())/1000/float64(s.n), float64(s.total.Milliseconds()))
	}
}
