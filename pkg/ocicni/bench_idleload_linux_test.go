package ocicni

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// BenchmarkSetupsBesideIdleLoad is why GC paces its DELs (see gcPacer)
// instead of relying on CPU priority alone. It times the setups of
// BenchmarkGC10000's workers, without its synthetic attachments, with the
// CPUs otherwise idle, and beside one busy loop per CPU started as the
// manager starts a background DEL's plugin (SCHED_IDLE, nice 19, see
// pluginexec.StartLowPriority), alternating, and reports both p50s and
// p99s and their ratios. A ratio above 1 is what
// the lowest priority cannot keep from the setups: on a small VM the busy
// CPUs slow the setups beside them all the same.
func BenchmarkSetupsBesideIdleLoad(b *testing.B) {
	testenv.RequireRoot(b)
	require.NotEmpty(b, pluginDir, "plugins are built by TestMain")
	const perRound = 20 // setups per worker and round
	e := newSetupBenchEnv(b, testenv.Alloc(b))
	ctx := context.Background()
	var idle, loaded []time.Duration
	for i := 0; b.Loop(); i++ {
		idle = append(idle, e.baseline(ctx, perRound, fmt.Sprint("idle", i))...)
		stop := startIdleLoad(b, runtime.NumCPU())
		loaded = append(loaded, e.baseline(ctx, perRound, fmt.Sprint("loaded", i))...)
		stop()
	}
	b.ReportMetric(percentile(idle, 0.5), "setup-p50-ms")
	b.ReportMetric(percentile(loaded, 0.5), "loaded-setup-p50-ms")
	b.ReportMetric(percentile(loaded, 0.5)/percentile(idle, 0.5), "p50-ratio")
	b.ReportMetric(percentile(idle, 0.99), "setup-p99-ms")
	b.ReportMetric(percentile(loaded, 0.99), "loaded-setup-p99-ms")
	b.ReportMetric(percentile(loaded, 0.99)/percentile(idle, 0.99), "p99-ratio")
}

// startIdleLoad starts n busy loops at the priority of background DELs,
// and returns what stops them.
func startIdleLoad(b *testing.B, n int) (stop func()) {
	b.Helper()
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := pluginexec.StartLowPriority(c); err != nil {
			stop()
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return stop
}

// baseline times n setups per worker, beside whatever else runs.
func (e *gcBenchEnv) baseline(ctx context.Context, n int, tag string) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for w := range gcBenchSetupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				took, err := e.podCycle(ctx, w, i, tag)
				if err != nil {
					e.b.Error(err)
					return
				}
				mu.Lock()
				out = append(out, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}
