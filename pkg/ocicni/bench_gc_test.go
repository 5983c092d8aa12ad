package ocicni

import (
	"context"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

const (
	gcBenchEntries = 10_000
	gcBenchStale   = 1_000
	// gcBenchSetupWorkers set pods up and tear them down on a real bridge
	// network of their own, before, during and after GC.
	gcBenchSetupWorkers = 2
	// gcBenchBaseline is how many setups each worker times without GC,
	// half before GC and half after, so that the machine's drift cancels.
	gcBenchBaseline = 20
)

// gcBenchNet is a network of synthetic attachments. No ADD ever runs on
// it, so its bridge is never created; its /16 lies outside the
// 10.200.0.0/13 that testenv.Alloc hands out.
type gcBenchNet struct {
	name, prefix string // prefix: the first two octets
	// gcReach chains host-local again after bridge and portmap, so that
	// the GC verb reaches host-local (bridge v1.10 does not pass GC on to
	// its IPAM) and scans every reservation, as a bridge that did would.
	// It costs every DEL two more scans of the reservations (the chained
	// host-local's, and the second, "legacy" scan of bridge's host-local,
	// which no longer finds the address), so only networks without stale
	// attachments set it.
	gcReach bool
}

// conflist returns the network's CNI 1.1.0 config: bridge with host-local
// over the /16, and portmap, as CRI-O's bridge example has them.
func (n gcBenchNet) conflist(dataDir string) string {
	ipam := map[string]any{
		"type": "host-local", "dataDir": dataDir,
		"ranges": [][]map[string]string{{{"subnet": n.prefix + ".0.0/16", "gateway": n.prefix + ".0.1"}}},
	}
	plugins := []string{
		mustJSONString(map[string]any{"type": "bridge", "bridge": "ocigc" + n.name, "isGateway": true, "ipam": ipam}),
		`{"type":"portmap","capabilities":{"portMappings":true}}`,
	}
	if n.gcReach {
		plugins = append(plugins, mustJSONString(map[string]any{"type": "host-local", "ipam": ipam}))
	}
	return testenv.Conflist(n.name, "1.1.0", plugins...)
}

// gcBenchLayout places the 10,000 attachments: 9,000 valid ones on valid,
// 1,000 stale ones on stale.
type gcBenchLayout struct {
	name         string
	valid, stale gcBenchNet
}

var (
	// gcBenchOneNet has every attachment on one network, as a node with
	// one pod network has them. Each stale DEL then makes host-local scan
	// all 10,000 reservations under its lock (it walks its whole store to
	// release an address), so stale DELs of one network cannot overlap
	// there, and that scan bounds GC's time.
	gcBenchOneNet = gcBenchLayout{
		name:  "onenet",
		valid: gcBenchNet{name: "gcbig", prefix: "10.150"},
		stale: gcBenchNet{name: "gcbig", prefix: "10.150"},
	}
	// gcBenchSplit keeps the 1,000 stale attachments on a network of
	// their own, so that host-local scans at most 1,000 reservations per
	// DEL and the manager's own cost shows. The valid network's GC verb
	// scans the 9,000 valid reservations with the gate held exclusively.
	gcBenchSplit = gcBenchLayout{
		name:  "split",
		valid: gcBenchNet{name: "gcvalid", prefix: "10.150", gcReach: true},
		stale: gcBenchNet{name: "gcstale", prefix: "10.151"},
	}
)

func mustJSONString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// gcBenchEnv is one run: a conf dir with the synthetic networks first
// (the valid one is the default) and the setup network last, and a cache
// dir holding 10,000 synthetic attachments.
type gcBenchEnv struct {
	b                          *testing.B
	layout                     gcBenchLayout
	confDir, cacheDir, dataDir string
	m                          *Manager
	valid                      []*PodNetwork
	validIPs                   []string
	nss                        []string // one netns per setup worker

	mu    sync.Mutex // guards the fields below
	live  map[string]*PodNetwork
	execs map[string]*execStat // by "VERB plugin", while GC runs
}

type execStat struct {
	n     int
	total time.Duration
}

func newGCBenchEnv(b *testing.B, layout gcBenchLayout, setupNet testenv.Net, workers int) *gcBenchEnv {
	b.Helper()
	dir := b.TempDir()
	e := &gcBenchEnv{
		b: b, layout: layout,
		confDir: filepath.Join(dir, "net.d"), cacheDir: filepath.Join(dir, "cache"), dataDir: filepath.Join(dir, "ipam"),
		live: map[string]*PodNetwork{}, execs: map[string]*execStat{},
	}
	require.NoError(b, os.MkdirAll(e.confDir, 0o755))
	testenv.WriteFile(b, e.confDir, "10-"+layout.valid.name+".conflist", layout.valid.conflist(e.dataDir))
	if layout.stale.name != layout.valid.name {
		testenv.WriteFile(b, e.confDir, "11-"+layout.stale.name+".conflist", layout.stale.conflist(e.dataDir))
	}
	testenv.WriteFile(b, e.confDir, "20-gcsetup.conflist", testenv.BridgeConflist("gcsetup", "1.1.0", setupNet, e.dataDir))
	e.synthesize()
	for range gcBenchSetupWorkers {
		p, err := netns.New()
		require.NoError(b, err)
		e.nss = append(e.nss, p)
		b.Cleanup(func() { _ = netns.Remove(p) })
	}
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := New(WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir), WithoutWatcher(),
		WithLogger(logrus.NewEntry(logger)), WithGCWorkers(workers), WithPluginHook(e.hook))
	require.NoError(b, err)
	b.Cleanup(func() { _ = m.Shutdown() })
	e.m = m
	return e
}

// synthesize writes, as libcni, host-local and ocicni would have left
// them, a cache entry, a reservation and an order record for each of
// 10,000 attachments whose netns are gone. The first 9,000 are valid
// pods.
func (e *gcBenchEnv) synthesize() {
	e.b.Helper()
	results, orders := filepath.Join(e.cacheDir, "results"), filepath.Join(e.cacheDir, "ocicni", "attachments")
	for _, d := range []string{results, orders} {
		require.NoError(e.b, os.MkdirAll(d, 0o700))
	}
	next := map[string]uint32{} // next host number per network
	for i := range gcBenchEntries {
		n := e.layout.stale
		if i < gcBenchEntries-gcBenchStale {
			n = e.layout.valid
		}
		leases := filepath.Join(e.dataDir, n.name)
		require.NoError(e.b, os.MkdirAll(leases, 0o700))
		base := netip.MustParseAddr(n.prefix + ".0.10").As4()
		var a [4]byte
		be.BigEndian.PutUint32(a[:], be.BigEndian.Uint32(base[:])+next[n.name])
		next[n.name]++
		ip := netip.AddrFrom4(a).String()
		id := fmt.Sprintf("gcbench%08x", i)
		nsPath := fmt.Sprintf("/run/netns/gcbench-gone-%d", i)
		entry, err := json.Marshal(map[string]any{
			"kind": "cniCacheV1", "containerId": id, "config": []byte(n.conflist(e.dataDir)), "ifName": "eth0",
			"networkName": n.name, "netns": nsPath,
			"cniArgs": [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", id}, {"K8S_POD_INFRA_CONTAINER_ID", id}},
			"result": map[string]any{
				"cniVersion": "1.1.0",
				"interfaces": []map[string]any{
					{"name": "ocigc" + n.name, "mac": "02:00:00:00:00:01"},
					{"name": fmt.Sprintf("veth%08x", i), "mac": "02:00:00:00:00:02"},
					{"name": "eth0", "mac": "02:00:00:00:00:03", "sandbox": nsPath},
				},
				"ips": []map[string]any{{"address": ip + "/16", "gateway": n.prefix + ".0.1", "interface": 2}},
			},
		})
		require.NoError(e.b, err)
		require.NoError(e.b, os.WriteFile(filepath.Join(results, n.name+"-"+id+"-eth0"), entry, 0o600))
		require.NoError(e.b, os.WriteFile(filepath.Join(leases, ip), []byte(id+"\r\neth0"), 0o600))
		order := fmt.Sprintf(`{"kind":"ocicniOrderV1","containerId":%q,"attachments":[{"network":%q,"ifName":"eth0","netns":%q}]}`,
			id, n.name, nsPath)
		require.NoError(e.b, os.WriteFile(filepath.Join(orders, id), []byte(order), 0o600))
		if i < gcBenchEntries-gcBenchStale {
			e.valid = append(e.valid, &PodNetwork{ID: id, Name: id, Namespace: "bench"})
			e.validIPs = append(e.validIPs, ip)
		}
	}
}

// hook counts plugin runs by verb and type while GC runs (gcbig's and the
// GC verbs; setups on gcsetup are left out).
func (e *gcBenchEnv) hook(_ context.Context, r PluginRun) {
	if r.Network == "gcsetup" && r.Verb != "GC" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := r.Verb + " " + r.Plugin
	if e.execs[k] == nil {
		e.execs[k] = &execStat{}
	}
	e.execs[k].n++
	e.execs[k].total += r.Duration
}

// podCycle sets a fresh pod up and tears it down on gcsetup, and returns
// when the setup started and how long it took. The pod is live, that is
// among the pods a GC that starts meanwhile takes as valid, from before
// its setup until its teardown returns.
func (e *gcBenchEnv) podCycle(ctx context.Context, w, i int, tag string) (time.Time, time.Duration, error) {
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
		return start, 0, fmt.Errorf("setup %s: %w", pod.ID, err)
	}
	took := time.Since(start)
	pod.Networks = nil
	if err := e.m.TearDownPodWithContext(ctx, *pod); err != nil {
		return start, took, fmt.Errorf("teardown %s: %w", pod.ID, err)
	}
	return start, took, nil
}

// baseline times n setups per worker without GC.
func (e *gcBenchEnv) baseline(ctx context.Context, n int, tag string) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for w := range gcBenchSetupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				_, took, err := e.podCycle(ctx, w, i, tag)
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

// gcWithSetups runs GC with the valid synthetic pods and the live setup
// pods, while the setup workers keep going, and returns GC's duration and
// the latencies of the setups that started while GC ran.
func (e *gcBenchEnv) gcWithSetups(ctx context.Context) (time.Duration, []time.Duration) {
	var (
		mu             sync.Mutex
		during         []time.Duration
		gcStart, gcEnd time.Time
		wg             sync.WaitGroup
		stop           = make(chan struct{})
		started        = make(chan struct{}, gcBenchSetupWorkers)
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
				start, took, err := e.podCycle(ctx, w, i, "gc")
				if err != nil {
					e.b.Error(err)
					return
				}
				mu.Lock()
				if !gcStart.IsZero() && start.After(gcStart) && (gcEnd.IsZero() || start.Before(gcEnd)) {
					during = append(during, took)
				}
				mu.Unlock()
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
	mu.Lock()
	gcStart = time.Now()
	mu.Unlock()
	err := e.m.GC(ctx, valid)
	mu.Lock()
	gcEnd = time.Now()
	mu.Unlock()
	close(stop)
	wg.Wait()
	require.NoError(e.b, err)
	return gcEnd.Sub(gcStart), during
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
	listing, err := e.m.cache.List()
	require.NoError(e.b, err)
	require.Len(e.b, listing.Entries, gcBenchEntries-gcBenchStale, "cache entries left")
	require.Empty(e.b, listing.Corrupt)
	ids, err := e.m.cache.ListOrders()
	require.NoError(e.b, err)
	require.Len(e.b, ids, gcBenchEntries-gcBenchStale, "order records left")
}

func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return float64(s[min(max(i, 0), len(s)-1)].Microseconds()) / 1000
}

// BenchmarkGC10000 runs GC over 10,000 cache entries of CNI 1.1.0 bridge
// networks (9,000 valid pods and 1,000 stale ones, whose netns are gone)
// with real plugins, while two workers set pods up and tear them down on
// another bridge network. It reports GC's wall time (and, of it, the time
// planning takes on its own), the setup latency without GC and for setups
// that started during GC, and logs how GC's plugin runs were spent.
//
// "onenet" is the layout of the issue, every attachment on one network:
// there host-local's DEL, which walks its whole store under its lock,
// bounds GC's time. "split" puts the stale attachments on a network of
// their own and varies [WithGCWorkers]. Run one with, for example,
// -bench 'BenchmarkGC10000/split/workers=4' -benchtime 1x.
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
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					benchGCOnce(b, tc.layout, setupNet, workers, i)
				}
			})
		}
	}
}

// benchGCOnce times one GC on its own, and then, on fresh copies of the
// same entries, one GC while the setup workers keep setting pods up. The
// timer is stopped on entry; it runs only for the GC on its own.
func benchGCOnce(b *testing.B, layout gcBenchLayout, setupNet testenv.Net, workers, i int) {
	b.Helper()
	ctx := context.Background()
	e := newGCBenchEnv(b, layout, setupNet, workers)
	start := time.Now()
	watch := e.m.setups.watch()
	planned, _ := e.m.planGC(e.valid, e.m.snapshot(), watch, e.m.log)
	plan := time.Since(start)
	watch.stop()
	require.Len(b, planned.stale, gcBenchStale)
	b.StartTimer()
	start = time.Now()
	require.NoError(b, e.m.GC(ctx, e.valid))
	alone := time.Since(start)
	b.StopTimer()
	e.check()
	e.logExecs(b, "GC alone")

	e = newGCBenchEnv(b, layout, setupNet, workers)
	base := e.baseline(ctx, gcBenchBaseline/2, fmt.Sprint("pre", i))
	busy, during := e.gcWithSetups(ctx)
	base = append(base, e.baseline(ctx, gcBenchBaseline/2, fmt.Sprint("post", i))...)
	e.check()
	e.logExecs(b, "GC during setups")
	b.ReportMetric(float64(alone.Milliseconds()), "gc-ms")
	b.ReportMetric(float64(plan.Milliseconds()), "plan-ms")
	b.ReportMetric(float64(busy.Milliseconds()), "gc-busy-ms")
	reportLatencies(b, base, during)
}

// reportLatencies reports the setup latencies without GC (base) and of
// the setups that started during GC, and their ratios.
func reportLatencies(b *testing.B, base, during []time.Duration) {
	b.Helper()
	b.ReportMetric(percentile(base, 0.5), "setup-p50-ms")
	b.ReportMetric(percentile(base, 0.99), "setup-p99-ms")
	b.ReportMetric(percentile(during, 0.5), "gc-setup-p50-ms")
	b.ReportMetric(percentile(during, 0.99), "gc-setup-p99-ms")
	b.ReportMetric(float64(len(during)), "setups-during-gc")
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
