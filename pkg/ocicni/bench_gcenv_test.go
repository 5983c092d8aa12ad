package ocicni

import (
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// The environment of BenchmarkGC10000: networks, layouts, and 10,000
// synthetic attachments written as libcni, host-local and the manager
// would have left them.

const (
	gcBenchEntries = 10_000
	gcBenchStale   = 1_000
	// gcBenchSetupWorkers set pods up and tear them down on a real bridge
	// network of their own while GC runs.
	gcBenchSetupWorkers = 2
	// While GC runs, the setups alternate between gcBenchDuringBlock
	// setups with GC's DEL workers going and gcBenchBaseBlock setups with
	// them held (the baseline), so that both sides see the same state of
	// the machine, which drifts over GC's minutes.
	gcBenchDuringBlock = 40
	gcBenchBaseBlock   = 10
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
	nss                        []string     // one netns per setup worker
	hold                       *benchGCHold // given to GC through its ctx in gcWithSetups

	mu        sync.Mutex // guards the fields below
	live      map[string]*PodNetwork
	execs     map[string]*execStat // by "VERB plugin", while GC runs
	firstVerb time.Time            // when the first GC verb began; zero before
}

type execStat struct {
	n     int
	total time.Duration
}

func newGCBenchEnv(b *testing.B, layout gcBenchLayout, setupNet testenv.Net, workers int) *gcBenchEnv {
	b.Helper()
	e := newGCBenchDirs(b, layout)
	testenv.WriteFile(b, e.confDir, "10-"+layout.valid.name+".conflist", layout.valid.conflist(e.dataDir))
	if layout.stale.name != layout.valid.name {
		testenv.WriteFile(b, e.confDir, "11-"+layout.stale.name+".conflist", layout.stale.conflist(e.dataDir))
	}
	e.synthesize()
	e.start(setupNet, workers)
	return e
}

// newSetupBenchEnv is a gcBenchEnv with the setup network alone: no
// synthetic network or attachment, for benchmarks of the setup workers
// without GC.
func newSetupBenchEnv(b *testing.B, setupNet testenv.Net) *gcBenchEnv {
	b.Helper()
	e := newGCBenchDirs(b, gcBenchLayout{name: "none"})
	e.start(setupNet, 1)
	return e
}

// newGCBenchDirs makes the env's directories.
func newGCBenchDirs(b *testing.B, layout gcBenchLayout) *gcBenchEnv {
	b.Helper()
	dir := b.TempDir()
	e := &gcBenchEnv{
		b: b, layout: layout,
		confDir: filepath.Join(dir, "net.d"), cacheDir: filepath.Join(dir, "cache"), dataDir: filepath.Join(dir, "ipam"),
		live: map[string]*PodNetwork{}, execs: map[string]*execStat{}, hold: newBenchGCHold(),
	}
	require.NoError(b, os.MkdirAll(e.confDir, 0o755))
	return e
}

// start writes the setup network's config last, makes the setup workers'
// netns and starts the manager with workers GC workers.
func (e *gcBenchEnv) start(setupNet testenv.Net, workers int) {
	b := e.b
	b.Helper()
	testenv.WriteFile(b, e.confDir, "20-gcsetup.conflist", testenv.BridgeConflist("gcsetup", "1.1.0", setupNet, e.dataDir))
	for range gcBenchSetupWorkers {
		p, err := netns.New()
		require.NoError(b, err)
		e.nss = append(e.nss, p)
		b.Cleanup(func() { _ = netns.Remove(p) })
	}
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := New(WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir), WithoutWatcher(), WithoutHealing(),
		WithLogger(logrus.NewEntry(logger)), WithGCWorkers(workers), WithPluginHook(e.hook))
	require.NoError(b, err)
	b.Cleanup(func() { _ = m.Shutdown() })
	e.m = m
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
