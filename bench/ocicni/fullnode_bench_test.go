package ocicni_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// BenchmarkFullNode measures what a pod's setup, status and teardown cost
// the manager on a node whose cache already holds 0, 1,000 or 10,000
// entries of other sandboxes (and as many order records). The plugins are
// a FakeExec that answers at once, so the times are the manager's and
// libcni's own work; the question is how they grow with the node's cache.
// Each operation is timed on its own and reported as a median, in µs.
// It needs no root.
func BenchmarkFullNode(b *testing.B) {
	for _, others := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("entries=%d", others), func(b *testing.B) {
			env := ocicnitest.NewEnv(b)
			env.WriteConflist(b, "podnet", "1.1.0", "bridge", "portmap")
			fillCache(b, env.CacheDir, others)
			m := env.NewManager(b)
			nsPath := env.NetNS(b, "pod")
			ctx := context.Background()
			var up, status, down []float64
			for i := 0; b.Loop(); i++ {
				pod := ocicni.PodNetwork{ID: fmt.Sprintf("pod%08d", i), NetNS: nsPath, Name: "pod", Namespace: "bench"}
				start := time.Now()
				if _, err := m.SetUpPodWithContext(ctx, pod); err != nil {
					b.Fatal(err)
				}
				up = append(up, usSince(start))
				start = time.Now()
				if _, err := m.GetPodNetworkStatusWithContext(ctx, pod); err != nil {
					b.Fatal(err)
				}
				status = append(status, usSince(start))
				start = time.Now()
				if err := m.TearDownPodWithContext(ctx, pod); err != nil {
					b.Fatal(err)
				}
				down = append(down, usSince(start))
				env.Exec.ResetCalls()
			}
			b.ReportMetric(testenv.Quantile(up, 0.5), "setup-us")
			b.ReportMetric(testenv.Quantile(status, 0.5), "status-us")
			b.ReportMetric(testenv.Quantile(down, 0.5), "teardown-us")
		})
	}
}

// fillCache writes n cache entries and n order records of other sandboxes
// into cacheDir, in the formats libcni and the manager write, directly
// (libcni's ADD and durable records would take minutes for 10,000).
func fillCache(b *testing.B, cacheDir string, n int) {
	b.Helper()
	results, orders := filepath.Join(cacheDir, "results"), filepath.Join(cacheDir, "ocicni", "attachments")
	for _, d := range []string{results, orders} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("other%059x", i) // 64 characters, as runtimes' IDs
		entry := fmt.Sprintf(`{"kind":"cniCacheV1","containerId":%q,"config":"e30=","ifName":"eth0","networkName":"podnet",`+
			`"netns":"/run/netns/gone","result":{"cniVersion":"1.1.0","ips":[{"address":"10.88.%d.%d/16"}]}}`, id, i/250, i%250+2)
		order := fmt.Sprintf(`{"kind":"ocicniOrderV1","containerId":%q,"attachments":[{"network":"podnet","ifName":"eth0","netns":"/run/netns/gone"}]}`, id)
		if err := os.WriteFile(filepath.Join(results, "podnet-"+id+"-eth0"), []byte(entry), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(orders, id), []byte(order), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

func usSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1000 }
