package gocni

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	gocni "github.com/containerd/go-cni"
	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	face "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var pluginDir string

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPlugins(m, &pluginDir)) }

// The three sides run the same pod, in containerd's configuration: the
// loopback network, then one bridge + host-local network from a conf dir,
// interfaces lo and eth0, with the labels and capabilities containerd's
// CRI plugin passes. Each side gets a fresh netns per pod in the paired
// benchmark, so that no side finds lo already up.
const (
	sideRaw   = "libcni"
	sideGoCNI = "gocni"
	sideFace  = "face"
)

// A side sets a pod up and tears it down, as containerd's sandbox run
// and stop do.
type side interface {
	up(ctx context.Context, id, nsPath string) error
	down(ctx context.Context, id, nsPath string) error
}

// env holds the three sides over one conf dir, one bridge network and
// one host-local data dir.
type env struct {
	sides map[string]side
	// prefix starts every sandbox ID of this run, so that the go-cni
	// side's entries in libcni's default cache dir (go-cni has no option
	// for another) are found at the end.
	prefix  string
	net     testenv.Net
	dataDir string // host-local's, for every side
	// facePlugins is how long the face's plugin runs took in all, from
	// its plugin hook: the face's time less this is its own.
	facePlugins atomic.Int64
}

// containerdOpts are the namespace options containerd v2.4.2's CRI plugin
// passes for a pod without port mappings, bandwidth or DNS settings
// (cniNamespaceOpts): the Kubernetes labels as CNI_ARGS, and the pod
// annotations as a capability.
func containerdOpts[O any](id string, labels func(map[string]string) O, capability func(string, interface{}) O) []O {
	return []O{
		labels(map[string]string{
			"K8S_POD_NAMESPACE":          "bench",
			"K8S_POD_NAME":               id,
			"K8S_POD_INFRA_CONTAINER_ID": id,
			"K8S_POD_UID":                "uid-" + id,
			"IgnoreUnknown":              "1",
		}),
		capability("io.kubernetes.cri.pod-annotations", map[string]string{"bench": "gocni"}),
	}
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	testenv.RequireRoot(tb)
	dir := tb.TempDir()
	confDir := filepath.Join(dir, "net.d")
	require.NoError(tb, os.MkdirAll(confDir, 0o755))
	e := &env{
		sides:   map[string]side{},
		prefix:  fmt.Sprintf("gocnibench%d-", os.Getpid()),
		net:     testenv.Alloc(tb),
		dataDir: filepath.Join(dir, "ipam"),
	}
	conf := testenv.BridgeConflist("bench", "1.0.0", e.net, e.dataDir)
	testenv.WriteFile(tb, confDir, "10-bench.conflist", conf)

	// containerd's calls (internal/cri/server/service.go and
	// service_linux.go): New with these options, then Load with the
	// loopback network and the conf dir's first file.
	g, err := gocni.New(gocni.WithMinNetworkCount(2), gocni.WithPluginConfDir(confDir),
		gocni.WithPluginMaxConfNum(1), gocni.WithPluginDir([]string{pluginDir}), gocni.WithInterfacePrefix("eth"))
	require.NoError(tb, err)
	require.NoError(tb, g.Load(gocni.WithLoNetwork, gocni.WithDefaultConf))
	e.sides[sideGoCNI] = goCNISide{g}

	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	f, err := face.New(face.WithMinNetworkCount(2), face.WithPluginConfDir(confDir),
		face.WithPluginMaxConfNum(1), face.WithPluginDir([]string{pluginDir}), face.WithInterfacePrefix("eth"),
		face.WithEngineOptions(ocicni.WithCacheDir(filepath.Join(dir, "face-cache")), ocicni.WithLogger(logrus.NewEntry(logger)),
			ocicni.WithPluginHook(func(_ context.Context, r ocicni.PluginRun) { e.facePlugins.Add(int64(r.Duration)) })))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = f.(*face.Face).Shutdown() })
	require.NoError(tb, f.Load(face.WithLoNetwork, face.WithDefaultConf))
	e.sides[sideFace] = faceSide{f}

	lo, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"0.3.1","name":"cni-loopback","plugins":[{"type":"loopback"}]}`))
	require.NoError(tb, err)
	br, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(tb, err)
	e.sides[sideRaw] = &rawSide{
		cni:   libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, filepath.Join(dir, "raw-cache"), nil),
		lists: []*libcni.NetworkConfigList{lo, br},
		ifs:   []string{"lo", "eth0"},
	}
	tb.Cleanup(func() { e.checkGoCNICache(tb) })
	return e
}

// checkGoCNICache fails the benchmark when go-cni left a cache entry of
// this run in libcni's default cache dir, and removes it.
func (e *env) checkGoCNICache(tb testing.TB) {
	tb.Helper()
	left, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", "*-"+e.prefix+"*"))
	for _, p := range left {
		_ = os.Remove(p)
	}
	if len(left) > 0 {
		tb.Errorf("go-cni left %d cache entries in /var/lib/cni/results (removed)", len(left))
	}
}

type goCNISide struct{ c gocni.CNI }

func (s goCNISide) up(ctx context.Context, id, nsPath string) error {
	_, err := s.c.Setup(ctx, id, nsPath, containerdOpts(id, gocni.WithLabels, gocni.WithCapability)...)
	return err
}

func (s goCNISide) down(ctx context.Context, id, nsPath string) error {
	return s.c.Remove(ctx, id, nsPath, containerdOpts(id, gocni.WithLabels, gocni.WithCapability)...)
}

type faceSide struct{ c face.CNI }

func (s faceSide) up(ctx context.Context, id, nsPath string) error {
	_, err := s.c.Setup(ctx, id, nsPath, containerdOpts(id, face.WithLabels, face.WithCapability)...)
	return err
}

func (s faceSide) down(ctx context.Context, id, nsPath string) error {
	return s.c.Remove(ctx, id, nsPath, containerdOpts(id, face.WithLabels, face.WithCapability)...)
}

// rawSide is what a runtime using libcni directly does with the same
// networks: ADD each in order (the loopback plugin included), DEL in
// reverse order, with the same CNI_ARGS and capability.
type rawSide struct {
	cni   *libcni.CNIConfig
	lists []*libcni.NetworkConfigList
	ifs   []string
}

func (s *rawSide) rt(id, nsPath, ifName string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: id, NetNS: nsPath, IfName: ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", "bench"},
			{"K8S_POD_NAME", id},
			{"K8S_POD_INFRA_CONTAINER_ID", id},
			{"K8S_POD_UID", "uid-" + id},
		},
		CapabilityArgs: map[string]interface{}{"io.kubernetes.cri.pod-annotations": map[string]string{"bench": "gocni"}},
	}
}

func (s *rawSide) up(ctx context.Context, id, nsPath string) error {
	for i, l := range s.lists {
		if _, err := s.cni.AddNetworkList(ctx, l, s.rt(id, nsPath, s.ifs[i])); err != nil {
			return err
		}
	}
	return nil
}

func (s *rawSide) down(ctx context.Context, id, nsPath string) error {
	for i := len(s.lists) - 1; i >= 0; i-- {
		if err := s.cni.DelNetworkList(ctx, s.lists[i], s.rt(id, nsPath, s.ifs[i])); err != nil {
			return err
		}
	}
	return nil
}

// orders rotates which side goes first, second and last, so that none
// always gets the warmer caches.
var orders = [][]string{
	{sideRaw, sideGoCNI, sideFace},
	{sideGoCNI, sideFace, sideRaw},
	{sideFace, sideRaw, sideGoCNI},
	{sideFace, sideGoCNI, sideRaw},
	{sideGoCNI, sideRaw, sideFace},
	{sideRaw, sideFace, sideGoCNI},
}

// BenchmarkFaceVsGoCNI times one pod's setup and teardown through each
// side, each in a fresh netns, in rotating order. It reports the medians
// of the per-pod ratios face/go-cni, face/libcni and go-cni/libcni (of
// the whole cycle, and of setup and teardown alone), each side's median
// and p95, and the ratio of the p95s; and the face's own time per pod
// (outside its plugin runs) with the floor it leaves: the median of the
// face's plugin time over go-cni's pod, which no work of the face's own
// can go below.
func BenchmarkFaceVsGoCNI(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	cycle := map[string][]float64{}
	up := map[string][]float64{}
	down := map[string][]float64{}
	var faceGo, faceRaw, goRaw, faceGoUp, faceGoDown, faceOwn, floorGo []float64
	for i := 0; b.Loop(); i++ {
		t := map[string][2]time.Duration{}
		var facePlugins time.Duration
		for _, name := range orders[i%len(orders)] {
			nsPath, err := netns.New()
			require.NoError(b, err)
			id := fmt.Sprintf("%s%s%d", e.prefix, name, i)
			plugins := e.facePlugins.Load()
			start := time.Now()
			require.NoError(b, e.sides[name].up(ctx, id, nsPath), name)
			mid := time.Now()
			require.NoError(b, e.sides[name].down(ctx, id, nsPath), name)
			t[name] = [2]time.Duration{mid.Sub(start), time.Since(mid)}
			if name == sideFace {
				facePlugins = time.Duration(e.facePlugins.Load() - plugins)
			}
			require.NoError(b, netns.Remove(nsPath))
		}
		total := func(s string) float64 { return float64(t[s][0] + t[s][1]) }
		for s, d := range t {
			cycle[s] = append(cycle[s], testenv.Millis(d[0]+d[1]))
			up[s], down[s] = append(up[s], testenv.Millis(d[0])), append(down[s], testenv.Millis(d[1]))
		}
		faceGo = append(faceGo, total(sideFace)/total(sideGoCNI))
		faceRaw = append(faceRaw, total(sideFace)/total(sideRaw))
		goRaw = append(goRaw, total(sideGoCNI)/total(sideRaw))
		faceGoUp = append(faceGoUp, float64(t[sideFace][0])/float64(t[sideGoCNI][0]))
		faceGoDown = append(faceGoDown, float64(t[sideFace][1])/float64(t[sideGoCNI][1]))
		faceOwn = append(faceOwn, total(sideFace)/1e6-testenv.Millis(facePlugins))
		floorGo = append(floorGo, float64(facePlugins)/total(sideGoCNI))
	}
	b.ReportMetric(testenv.Quantile(faceGo, 0.5), "face/gocni")
	b.ReportMetric(testenv.Quantile(faceRaw, 0.5), "face/libcni")
	b.ReportMetric(testenv.Quantile(goRaw, 0.5), "gocni/libcni")
	b.ReportMetric(testenv.Quantile(faceGoUp, 0.5), "setup-face/gocni")
	b.ReportMetric(testenv.Quantile(faceGoDown, 0.5), "teardown-face/gocni")
	b.ReportMetric(testenv.Quantile(cycle[sideFace], 0.95)/testenv.Quantile(cycle[sideGoCNI], 0.95), "p95-face/gocni")
	// The floor: the face's plugin runs alone over go-cni's whole pod,
	// what face/gocni would be if the face's own time (lo, the order
	// record, libcni's work) were nothing.
	b.ReportMetric(testenv.Quantile(floorGo, 0.5), "floor-face/gocni")
	b.ReportMetric(testenv.Quantile(faceOwn, 0.5), "face-own-ms")
	for _, s := range []string{sideRaw, sideGoCNI, sideFace} {
		b.ReportMetric(testenv.Quantile(cycle[s], 0.5), s+"-ms")
		b.ReportMetric(testenv.Quantile(cycle[s], 0.95), s+"-p95-ms")
		b.ReportMetric(testenv.Quantile(up[s], 0.5), s+"-setup-ms")
		b.ReportMetric(testenv.Quantile(down[s], 0.5), s+"-teardown-ms")
	}
}

// BenchmarkFaceThroughput runs pod setup+teardown from 1 and 8 workers,
// as containerd does under load. Every iteration runs one round of each
// side, in rotating order, of podsPerWorker pods per worker, each worker
// in a netns of its own. It reports each side's pods per second over all
// rounds and the medians of the rounds' ratios (face over go-cni, face
// over libcni; higher is better).
func BenchmarkFaceThroughput(b *testing.B) {
	const podsPerWorker = 3
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			e := newEnv(b)
			ctx := context.Background()
			nss := make([]string, workers)
			for w := range nss {
				nss[w] = testenv.NewNS(b)
			}
			round := func(name string, r int) time.Duration {
				s := e.sides[name]
				took, err := testenv.RunWorkers(workers, podsPerWorker, func(w, i int) error {
					id := fmt.Sprintf("%s%s%d-%d-%d", e.prefix, name, r, w, i)
					if err := s.up(ctx, id, nss[w]); err != nil {
						return fmt.Errorf("%s: setup: %w", name, err)
					}
					if err := s.down(ctx, id, nss[w]); err != nil {
						return fmt.Errorf("%s: teardown: %w", name, err)
					}
					return nil
				})
				require.NoError(b, err)
				return took
			}
			totals := map[string]time.Duration{}
			var faceGo, faceRaw []float64
			rounds := 0
			for ; b.Loop(); rounds++ {
				t := map[string]time.Duration{}
				for _, name := range orders[rounds%len(orders)] {
					t[name] = round(name, rounds)
					totals[name] += t[name]
				}
				faceGo = append(faceGo, float64(t[sideGoCNI])/float64(t[sideFace]))
				faceRaw = append(faceRaw, float64(t[sideRaw])/float64(t[sideFace]))
			}
			pods := float64(rounds * workers * podsPerWorker)
			for _, s := range []string{sideRaw, sideGoCNI, sideFace} {
				b.ReportMetric(pods/totals[s].Seconds(), s+"-pods/s")
			}
			b.ReportMetric(testenv.Quantile(faceGo, 0.5), "throughput-face/gocni")
			b.ReportMetric(testenv.Quantile(faceRaw, 0.5), "throughput-face/libcni")
			b.ReportMetric(float64(totals[sideGoCNI])/float64(totals[sideFace]), "total-face/gocni")
		})
	}
}

// TestSidesAgree checks that the three sides do the same work, so that
// the benchmarks compare like with like: each attaches the pod (eth0 with
// one address of the network, lo up with 127.0.0.1/8) and detaches it
// (eth0 gone, the host-local reservation released).
func TestSidesAgree(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, name := range []string{sideRaw, sideGoCNI, sideFace} {
		t.Run(name, func(t *testing.T) {
			nsPath := testenv.NewNS(t)
			id := e.prefix + "agree-" + name
			require.NoError(t, e.sides[name].up(ctx, id, nsPath))
			addrs := testenv.AddrsIn(t, nsPath, "eth0")
			require.Len(t, addrs, 1, "eth0's addresses")
			ip, _, err := net.ParseCIDR(addrs[0])
			require.NoError(t, err)
			_, subnet, err := net.ParseCIDR(e.net.Subnet)
			require.NoError(t, err)
			require.True(t, subnet.Contains(ip), "eth0 has %s, not an address of %s", addrs[0], e.net.Subnet)
			require.Equal(t, []string{ip.String()}, testenv.Reservations(t, e.dataDir, "bench"))
			require.Contains(t, testenv.AddrsIn(t, nsPath, "lo"), "127.0.0.1/8", "lo is up")
			require.NoError(t, e.sides[name].down(ctx, id, nsPath))
			require.Nil(t, testenv.AddrsIn(t, nsPath, "eth0"), "eth0 is gone")
			require.Empty(t, testenv.Reservations(t, e.dataDir, "bench"), "the reservation is released")
		})
	}
}
