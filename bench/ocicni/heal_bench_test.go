package ocicni_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The defaults of [ocicni.HealPolicy], which the manager runs with and
// the bound is derived from. Pods are set up throughout the healing, so
// retries run SetupConcurrency at a time.
const (
	healInitial          = time.Second
	healMax              = 5 * time.Minute
	healSetupConcurrency = 1
)

// The failing network: a bridge of its own with a /20 (a bridge takes
// 1,023 ports; testenv's networks are /24s in 10.200.0.0-10.249.255.255).
const (
	healNet    = "healscale"
	healBridge = "ochealscale0"
	healSubnet = "10.190.0.0/20"
)

// BenchmarkHealAtScale sets up N sandboxes (HEAL_SCALE_N, default 1,000,
// at most 1,000) on a bridge network whose last plugin, a recorder, fails
// DEL with code 11 while a flag file exists, tears them all down with the
// flag there (each teardown fails with RetryLater and leaves its sandbox,
// netns kept, to the healer), then removes the flag: the fault clears at
// T_clear. Meanwhile pods are set up and torn down one after another on a
// second bridge network, until every sandbox is released (no pending
// teardown, no host-local reservation, no cache entry, no bridge port) at
// T_done. The manager runs the default [ocicni.HealPolicy]; run it with
// -benchtime 1x.
//
// The bound, from the policy: a sandbox whose k-th DEL (the teardown's or
// a retry's) failed at F gets its next retry due by F + min(Initial×2^(k-1),
// Max), since jitter only shortens a delay; its last failure is the last
// before T_clear, so that retry succeeds. Every retry is due by T_due,
// the latest of those; from then at most N remain, run SetupConcurrency
// at a time (setups run throughout), so
//
//	T_done ≤ T_due + ceil(N/SetupConcurrency) × d
//
// with d the 90th percentile, in the same run, of a successful retry's
// plugin span (its first DEL's start to its last DEL's end). Retries that
// fall due while the teardowns still run fail and back off: the first
// sandboxes' T_due is later than their teardown + Initial (due-s).
//
// A setup's latency grows with the veths on the node, without any
// healing, and healing removes them as it goes. So the baseline is the
// same loop, before any DEL failed, with 0, N/4, N/2, 3N/4 and N
// sandboxes set up (all N netns exist from the start), and a setup while
// healing is compared with that curve at the count of sandboxes not yet
// released when it starts: setup-ratio is the median of those ratios
// (target ≤ 1.1). setup-ratio-empty compares with the empty node instead.
//
// It also reports release-s (T_done − T_clear), bound-s (bound − T_clear),
// release-ratio (≤ 1), due-s (T_due − T_clear), heal-retries (and how
// many of them failed), d, and the setup p50s while healing, on the empty
// node and with all N sandboxes up.
func BenchmarkHealAtScale(b *testing.B) {
	n := 1000
	if s := os.Getenv("HEAL_SCALE_N"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	require.True(b, n >= 4 && n <= 1000, "HEAL_SCALE_N in [4, 1000]: one bridge holds the sandboxes")
	e := newHealScaleEnv(b, n)
	curve := e.setUpAll(b)
	b.Logf("setup p50 without healing, {sandboxes up, ms}: %v", curve)
	tClear := e.failAll(b)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	released := e.awaitReleased(ctx)
	hard := time.NewTimer(5 * time.Minute)
	defer hard.Stop()
	var during, ratios []float64
	var tDone time.Time
	for i := 0; tDone.IsZero(); i++ {
		select {
		case tDone = <-released:
			continue
		case <-hard.C:
			pending, err := e.m.PendingTeardowns()
			require.NoError(b, err)
			require.FailNow(b, "sandboxes not released within 5 min of the fault clearing", "%d pending", len(pending))
		default:
		}
		left := n - e.log.healed()
		ms := e.freeCycle(b, fmt.Sprintf("during%d", i))
		during, ratios = append(during, ms), append(ratios, ms/curve.at(left))
	}
	e.requireReleased(b)

	tDue, d, retries, failed := e.log.summary()
	bound := tDue.Sub(tClear) + time.Duration((n+healSetupConcurrency-1)/healSetupConcurrency)*d
	release := tDone.Sub(tClear)
	b.ReportMetric(release.Seconds(), "release-s")
	b.ReportMetric(bound.Seconds(), "bound-s")
	b.ReportMetric(release.Seconds()/bound.Seconds(), "release-ratio")
	b.ReportMetric(tDue.Sub(tClear).Seconds(), "due-s")
	b.ReportMetric(testenv.Millis(d), "heal-retry-p90-ms")
	b.ReportMetric(float64(retries), "heal-retries")
	b.ReportMetric(float64(failed), "heal-retries-failed")
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "setup-ratio")
	b.ReportMetric(testenv.Quantile(during, 0.5)/curve[0].p50, "setup-ratio-empty")
	b.ReportMetric(testenv.Quantile(during, 0.5), "setup-p50-ms")
	b.ReportMetric(curve[0].p50, "setup-p50-empty-ms")
	b.ReportMetric(curve[len(curve)-1].p50, "setup-p50-full-ms")
	b.ReportMetric(float64(len(during)), "setups-during")
}

// healCurve is the setup p50 without healing, in ms, by how many
// sandboxes are set up, in increasing order of that count.
type healCurve []healPoint

type healPoint struct {
	up  int
	p50 float64
}

// at interpolates the curve linearly at up sandboxes.
func (c healCurve) at(up int) float64 {
	for i := 1; i < len(c); i++ {
		if lo, hi := c[i-1], c[i]; up <= hi.up {
			if hi.up == lo.up {
				return hi.p50
			}
			return lo.p50 + (hi.p50-lo.p50)*float64(up-lo.up)/float64(hi.up-lo.up)
		}
	}
	return c[len(c)-1].p50
}

// healScaleEnv is one manager, with healing on, over the failing network
// and the free one, where the pods that start meanwhile go.
type healScaleEnv struct {
	m                 *ocicni.Manager
	log               *healLog
	cacheDir, dataDir string
	flag              string              // while it exists, the failing network's DEL fails
	freeNS            string              // the free pods' netns, one at a time
	pods              []ocicni.PodNetwork // the sandboxes on the failing network
}

func newHealScaleEnv(b *testing.B, n int) *healScaleEnv {
	b.Helper()
	testenv.RequireRoot(b)
	dir := b.TempDir()
	e := &healScaleEnv{
		log: newHealLog(), cacheDir: filepath.Join(dir, "cache"), dataDir: filepath.Join(dir, "ipam"),
		flag: filepath.Join(dir, "fault"),
	}
	confDir := filepath.Join(dir, "net.d")
	require.NoError(b, os.MkdirAll(confDir, 0o755))
	require.NoError(b, netns.DeleteLink(healBridge)) // a stale one from a killed run
	b.Cleanup(func() { require.NoError(b, netns.DeleteLink(healBridge)) })
	testenv.WriteFile(b, confDir, "00-free.conflist", testenv.BridgeConflist("free", "1.0.0", testenv.Alloc(b), e.dataDir))
	failing := testenv.BridgeConflist(healNet, "1.0.0", testenv.Net{
		Bridge: healBridge, Subnet: healSubnet, Gateway: "10.190.0.1", RangeStart: "10.190.0.2", RangeEnd: "10.190.15.254",
	}, e.dataDir, testenv.RecorderConf(healNet, "1.0.0", "", map[string]any{
		"del": map[string]any{"errorCode": 11, "errorMsg": "injected", "onlyIfExists": e.flag},
	}))
	testenv.WriteFile(b, confDir, "10-healscale.conflist", failing)
	// WithHealing after newQuietManager's WithoutHealing: the later wins.
	e.m = newQuietManager(b, confDir, e.cacheDir, ocicni.WithHealing(ocicni.HealPolicy{StartDelay: time.Millisecond}), ocicni.WithPluginHook(e.log.hook))
	e.freeNS = testenv.NewNS(b)
	e.pods = make([]ocicni.PodNetwork, n)
	for i := range e.pods {
		id := fmt.Sprintf("heal%04d", i)
		e.pods[i] = ocicni.PodNetwork{ID: id, NetNS: testenv.NewNS(b), Name: id, Namespace: "bench", Networks: []ocicni.NetAttachment{{Name: healNet}}}
	}
	return e
}

// freeCycle sets up and tears down pod id on the free network and
// returns the setup's latency in ms.
func (e *healScaleEnv) freeCycle(b *testing.B, id string) float64 {
	b.Helper()
	ctx := context.Background()
	pod := ocicni.PodNetwork{ID: id, NetNS: e.freeNS, Name: id, Namespace: "bench", Networks: []ocicni.NetAttachment{{Name: "free"}}}
	start := time.Now()
	_, err := e.m.SetUpPodWithContext(ctx, pod)
	took := time.Since(start)
	require.NoError(b, err)
	require.NoError(b, e.m.TearDownPodWithContext(ctx, pod))
	return testenv.Millis(took)
}

// each runs op on the sandboxes in pods, from 4 workers: the admission's
// setup bound on 2 CPUs (more would queue).
func each(b *testing.B, pods []ocicni.PodNetwork, op func(pod ocicni.PodNetwork) error) {
	b.Helper()
	const workers = 4
	per := (len(pods) + workers - 1) / workers
	_, err := testenv.RunWorkers(workers, per, func(w, i int) error {
		if k := w*per + i; k < len(pods) {
			return op(pods[k])
		}
		return nil
	})
	require.NoError(b, err)
}

// setUpAll sets up the sandboxes a quarter at a time, and measures the
// baseline before each quarter and after the last.
func (e *healScaleEnv) setUpAll(b *testing.B) healCurve {
	b.Helper()
	const pods = 30
	ctx := context.Background()
	var curve healCurve
	for q := 0; ; q++ {
		up := q * len(e.pods) / 4
		lat := make([]float64, pods)
		for i := range lat {
			lat[i] = e.freeCycle(b, fmt.Sprintf("base%d-%d", q, i))
		}
		curve = append(curve, healPoint{up, testenv.Quantile(lat, 0.5)})
		if q == 4 {
			return curve
		}
		each(b, e.pods[up:(q+1)*len(e.pods)/4], func(pod ocicni.PodNetwork) error {
			_, err := e.m.SetUpPodWithContext(ctx, pod)
			return err
		})
	}
}

// failAll tears the sandboxes down with the fault on (each must fail
// with RetryLater) and clears the fault; it returns when it cleared.
func (e *healScaleEnv) failAll(b *testing.B) time.Time {
	b.Helper()
	ctx := context.Background()
	require.NoError(b, os.WriteFile(e.flag, nil, 0o600))
	each(b, e.pods, func(pod ocicni.PodNetwork) error {
		var te *ocicni.TeardownError
		if err := e.m.TearDownPodWithContext(ctx, pod); !errors.As(err, &te) {
			return fmt.Errorf("teardown of %s: want a *TeardownError, got %w", pod.ID, err)
		}
		if f := te.Failures(); len(f) != 1 || f[0].Class != ocicni.RetryLater {
			return fmt.Errorf("teardown of %s: want one RetryLater failure, got %+v", pod.ID, f)
		}
		return nil
	})
	require.NoError(b, os.Remove(e.flag))
	return time.Now()
}

// awaitReleased polls, every 10 ms, until every sandbox's retry
// succeeded and no teardown is pending, and then sends the time.
func (e *healScaleEnv) awaitReleased(ctx context.Context) <-chan time.Time {
	done := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if e.log.healed() < len(e.pods) {
				continue // cheap: PendingTeardowns reads every record
			}
			if pending, err := e.m.PendingTeardowns(); err == nil && len(pending) == 0 {
				done <- time.Now()
				return
			}
		}
	}()
	return done
}

// requireReleased checks that nothing of the failing sandboxes is left:
// no pending teardown, reservation, cache entry or port on the bridge.
func (e *healScaleEnv) requireReleased(b *testing.B) {
	b.Helper()
	pending, err := e.m.PendingTeardowns()
	require.NoError(b, err)
	require.Empty(b, pending)
	require.Empty(b, testenv.Reservations(b, e.dataDir, healNet))
	entries, err := os.ReadDir(filepath.Join(e.cacheDir, "results"))
	require.NoError(b, err)
	for _, f := range entries {
		require.False(b, strings.HasPrefix(f.Name(), healNet+"-"), "cache entry %s left", f.Name())
	}
	ports, err := os.ReadDir(filepath.Join("/sys/class/net", healBridge, "brif"))
	require.NoError(b, err)
	require.Empty(b, ports, "the retries deleted every veth")
}

// healLog records, from the plugin hook, the failing network's DELs:
// each sandbox's failed ones and when the last ended, the heal retries,
// and the span of each successful retry.
type healLog struct {
	mu       sync.Mutex
	fails    map[string]int           // sandbox -> failed DELs, the teardown's and the retries'
	lastFail map[string]time.Time     // sandbox -> when its last failed DEL ended
	started  map[string]time.Time     // sandbox -> when its successful retry's first DEL started
	spans    map[string]time.Duration // sandbox -> its successful retry's plugin span
	retries  int                      // heal retries: each runs the recorder's DEL first
	failed   int                      // of which failed
}

func newHealLog() *healLog {
	return &healLog{
		fails: map[string]int{}, lastFail: map[string]time.Time{},
		started: map[string]time.Time{}, spans: map[string]time.Duration{},
	}
}

func (l *healLog) hook(_ context.Context, r ocicni.PluginRun) {
	if r.Network != healNet || r.Verb != "DEL" {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	heal := r.Reason == "heal"
	if heal && r.Plugin == testenv.Recorder {
		l.retries++
	}
	switch {
	case r.Err != nil:
		l.fails[r.ContainerID]++
		l.lastFail[r.ContainerID] = now
		if heal {
			l.failed++
		}
	case heal && r.Plugin == testenv.Recorder:
		l.started[r.ContainerID] = now.Add(-r.Duration)
	case heal && r.Plugin == "bridge":
		l.spans[r.ContainerID] = now.Sub(l.started[r.ContainerID])
	}
}

// healed returns how many sandboxes had a successful retry.
func (l *healLog) healed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans)
}

// summary returns T_due, d (see BenchmarkHealAtScale), and the count of
// heal retries and of the failed ones.
func (l *healLog) summary() (tDue time.Time, d time.Duration, retries, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, k := range l.fails {
		if due := l.lastFail[id].Add(min(healInitial<<min(k-1, 20), healMax)); due.After(tDue) {
			tDue = due
		}
	}
	spans := make([]float64, 0, len(l.spans))
	for _, s := range l.spans {
		spans = append(spans, float64(s))
	}
	return tDue, time.Duration(testenv.Quantile(spans, 0.9)), l.retries, l.failed
}
