package ocicni

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// GC on a node that is never idle: BenchmarkGCBusyNode and
// BenchmarkGCBesideBurst, on the split layout of BenchmarkGC10000 (10,000
// entries, 1,000 stale, real plugins).

const (
	// gcBusyWorkers set pods up and tear them down without a pause, as a
	// runtime recreating its pods after a node restart while its first GC
	// runs.
	gcBusyWorkers = 4
	// gcBusyBase is how many setups each worker times around GC, the
	// baseline: the same node without GC. About as many as GC's 120 s
	// see, so that both p99s rest on as many samples.
	gcBusyBase = 250
	// gcBurst is the burst of BenchmarkGCBesideBurst, and
	// gcBurstDeadline the deadline CRI-O gives its GC.
	gcBurst         = 40
	gcBurstDeadline = 30 * time.Second
)

// addNetns gives the env n netns for its setup workers in all.
func (e *gcBenchEnv) addNetns(n int) {
	e.b.Helper()
	for len(e.nss) < n {
		p, err := netns.New()
		require.NoError(e.b, err)
		e.nss = append(e.nss, p)
		e.b.Cleanup(func() { _ = netns.Remove(p) })
	}
}

// gcRun is what one GC did, as the hook and its outcomes tell.
type gcRun struct {
	took, toVerb time.Duration // toVerb: -1 when no verb was sent
	deleted      int           // stale attachments deleted
	skipped      int           // networks not sent the verb
}

// runGC runs one GC with the valid synthetic pods and the live setup pods,
// under ctx.
func (e *gcBenchEnv) runGC(ctx context.Context) gcRun {
	e.mu.Lock()
	valid := append([]*PodNetwork(nil), e.valid...)
	for _, p := range e.live {
		valid = append(valid, p)
	}
	clear(e.execs)
	e.firstVerb = time.Time{}
	e.mu.Unlock()
	start := time.Now()
	outcomes, err := e.m.GCOutcomes(ctx, valid)
	r := gcRun{took: time.Since(start), toVerb: -1}
	for _, o := range outcomes {
		if o.Class == Deleted || o.Class == AlreadyGone {
			r.deleted++
		}
	}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			if errors.Is(e, ErrGCVerbsSkipped) {
				r.skipped++
			}
		}
	}
	e.mu.Lock()
	if !e.firstVerb.IsZero() {
		r.toVerb = e.firstVerb.Sub(start)
	}
	e.mu.Unlock()
	return r
}

// window is the stretch of time whose setups count: those that began
// after its start and ended before its end (zero: not yet).
type window struct {
	mu         sync.Mutex
	start, end time.Time
}

func (w *window) set(start, end *time.Time, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if start != nil {
		*start = t
	}
	if end != nil {
		*end = t
	}
}

// holds reports whether a setup that began at begun and ended at ended
// counts; a nil window counts every setup.
func (w *window) holds(begun, ended time.Time) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.start.IsZero() && begun.After(w.start) && (w.end.IsZero() || ended.Before(w.end))
}

// cycle is one pod cycle's setup: how long it took and when it ended.
type cycle struct {
	took time.Duration
	end  time.Time
}

func tooks(cs []cycle) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i] = c.took
	}
	return out
}

// cycles runs workers setup workers, each setting pods up and tearing them
// down one after the other, until n each are done (n > 0) or stop closes,
// and returns the setups of the cycles within win. Each worker signals
// started (unless nil) once its first cycle is done.
func (e *gcBenchEnv) cycles(ctx context.Context, workers, n int, tag string, stop <-chan struct{}, started chan<- struct{}, win *window,
) []cycle {
	var mu sync.Mutex
	var out []cycle
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; n <= 0 || i < n; i++ {
				select {
				case <-stop:
					return
				default:
				}
				begun := time.Now()
				took, err := e.podCycle(ctx, w, i, tag)
				if i == 0 && started != nil {
					started <- struct{}{}
				}
				if err != nil {
					e.b.Error(err)
					return
				}
				if win.holds(begun, begun.Add(took)) {
					mu.Lock()
					out = append(out, cycle{took: took, end: begun.Add(took)})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// BenchmarkGCBusyNode runs one GC, with a deadline
// (OCICNI_BENCH_GC_DEADLINE, default 120s), while gcBusyWorkers workers
// set pods up and tear them down without a pause, and reports the time
// until its first GC verb, the networks it could not send one to, the
// stale attachments it deleted and their rate until the verbs, and the
// setups that ran within GC against the same node without GC
// (gcBusyBase setups a worker, half timed just before GC and half just
// after, pooled, so that the node's drift during the run weighs on both
// sides).
func BenchmarkGCBusyNode(b *testing.B) {
	testenv.RequireRoot(b)
	require.NotEmpty(b, pluginDir, "plugins are built by TestMain")
	deadline := 120 * time.Second
	if s := os.Getenv("OCICNI_BENCH_GC_DEADLINE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(b, err)
		deadline = d
	}
	setupNet := testenv.Alloc(b)
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		e := newGCBenchEnv(b, gcBenchSplit, setupNet, defaultGCWorkers())
		e.addNetns(gcBusyWorkers)
		before := e.cycles(ctx, gcBusyWorkers, gcBusyBase/2, "base", nil, nil, nil)

		win := &window{}
		stop, started := make(chan struct{}), make(chan struct{}, gcBusyWorkers)
		busy := make(chan []cycle, 1)
		go func() { busy <- e.cycles(ctx, gcBusyWorkers, 0, "busy", stop, started, win) }()
		for range gcBusyWorkers {
			<-started
		}
		gctx, cancel := context.WithTimeout(ctx, deadline)
		win.set(&win.start, nil, time.Now())
		b.StartTimer()
		r := e.runGC(gctx)
		b.StopTimer()
		win.set(nil, &win.end, time.Now())
		cancel()
		close(stop)
		during := <-busy
		after := e.cycles(ctx, gcBusyWorkers, gcBusyBase-gcBusyBase/2, "after", nil, nil, nil)
		base := slices.Concat(before, after)
		b.ReportMetric(percentile(tooks(before), 0.99), "setup-p99-before-ms")
		b.ReportMetric(percentile(tooks(after), 0.99), "setup-p99-after-ms")
		// Where the setups' tail comes from: those that ended before GC
		// sent its first verb (its DELs alone) against all of them.
		var dels []time.Duration
		for _, c := range during {
			if r.toVerb < 0 || c.end.Before(win.start.Add(r.toVerb)) {
				dels = append(dels, c.took)
			}
		}
		e.logExecs(b, "GC on a busy node")
		b.Logf("GC on a busy node: %v (deadline %v), first verb after %v, %d networks skipped, %d stale deleted, %d setups within it",
			r.took.Round(time.Millisecond), deadline, r.toVerb.Round(time.Millisecond), r.skipped, r.deleted, len(during))
		b.ReportMetric(float64(r.took.Milliseconds()), "gc-ms")
		b.ReportMetric(float64(r.toVerb.Milliseconds()), "verb-ms")
		b.ReportMetric(float64(r.skipped), "verbs-skipped")
		b.ReportMetric(float64(r.deleted), "stale-deleted")
		phase := r.took
		if r.toVerb > 0 {
			phase = r.toVerb
		}
		b.ReportMetric(float64(r.deleted)/phase.Seconds(), "stale/s")
		if p := percentile(tooks(base), 0.99); p > 0 && len(dels) > 0 {
			b.ReportMetric(percentile(dels, 0.99)/p, "dels-p99-ratio")
		}
		reportLatencies(b, tooks(base), tooks(during))
	}
}

// BenchmarkGCBesideBurst is CRI-O's case: a GC with CRI-O's 30 s deadline
// that starts with a burst of gcBurst setups at once. It reports whether
// GC sent its verbs, and the burst's setup latencies against the same
// burst without GC, just before.
func BenchmarkGCBesideBurst(b *testing.B) {
	testenv.RequireRoot(b)
	require.NotEmpty(b, pluginDir, "plugins are built by TestMain")
	setupNet := testenv.Alloc(b)
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		e := newGCBenchEnv(b, gcBenchSplit, setupNet, defaultGCWorkers())
		e.addNetns(gcBurst)
		base := e.cycles(ctx, gcBurst, 1, "base", nil, nil, nil)

		burst := make(chan []cycle, 1)
		go func() { burst <- e.cycles(ctx, gcBurst, 1, "burst", nil, nil, nil) }()
		gctx, cancel := context.WithTimeout(ctx, gcBurstDeadline)
		b.StartTimer()
		r := e.runGC(gctx)
		b.StopTimer()
		cancel()
		during := <-burst
		b.Logf("GC beside a burst of %d: %v, first verb after %v, %d networks skipped, %d stale deleted",
			gcBurst, r.took.Round(time.Millisecond), r.toVerb.Round(time.Millisecond), r.skipped, r.deleted)
		b.ReportMetric(float64(r.took.Milliseconds()), "gc-ms")
		b.ReportMetric(float64(r.toVerb.Milliseconds()), "verb-ms")
		b.ReportMetric(float64(r.skipped), "verbs-skipped")
		b.ReportMetric(float64(r.deleted), "stale-deleted")
		reportLatencies(b, tooks(base), tooks(during))
	}
}
