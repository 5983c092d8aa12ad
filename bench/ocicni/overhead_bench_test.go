package ocicni_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/libcni"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seed-671fdd43/ocicni/internal/testenv"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// BenchmarkPodOverhead measures what a pod's setup and teardown cost
// outside the plugins: the plugins are a FakeExec that answers at once,
// so what is left is libcni's work (config injection, the result cache)
// and the manager's around it. The libcni case is raw libcni on the same
// configs with the same exec; the difference between the two, in time and
// in allocations (run with -benchmem), is the manager's own cost per pod.
// It needs no root.
func BenchmarkPodOverhead(b *testing.B) {
	for _, networks := range []int{1, 3} {
		b.Run(fmt.Sprintf("networks=%d", networks), func(b *testing.B) {
			env := ocicnitest.NewEnv(b)
			var lists []*libcni.NetworkConfigList
			var atts []ocicni.NetAttachment
			for i := range networks {
				name := fmt.Sprintf("net%d", i)
				env.Exec.Subnet(name, netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", i)))
				path := env.WriteConflist(b, name, "1.1.0", "bridge", "portmap")
				l, err := libcni.ConfListFromFile(path)
				if err != nil {
					b.Fatal(err)
				}
				lists = append(lists, l)
				atts = append(atts, ocicni.NetAttachment{Name: name, Ifname: fmt.Sprintf("eth%d", i)})
			}
			nsPath := env.NetNS(b, "pod")
			ctx := context.Background()

			b.Run("libcni", func(b *testing.B) {
				cni := libcni.NewCNIConfigWithCacheDir([]string{env.BinDir}, env.CacheDir, env.Exec)
				b.ReportAllocs()
				cpu := testenv.CPUNow(b)
				for i := 0; b.Loop(); i++ {
					id := fmt.Sprintf("raw%d", i)
					for j, l := range lists {
						rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: atts[j].Ifname}
						if _, err := cni.AddNetworkList(ctx, l, rt); err != nil {
							b.Fatal(err)
						}
					}
					for j := len(lists) - 1; j >= 0; j-- {
						rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: atts[j].Ifname}
						if err := cni.DelNetworkList(ctx, lists[j], rt); err != nil {
							b.Fatal(err)
						}
					}
					env.Exec.ResetCalls()
				}
				reportCPU(b, cpu)
			})
			managed := func(b *testing.B, m *ocicni.Manager) {
				b.ReportAllocs()
				cpu := testenv.CPUNow(b)
				for i := 0; b.Loop(); i++ {
					pod := ocicni.PodNetwork{ID: fmt.Sprintf("mgr%d", i), NetNS: nsPath, Name: "pod", Namespace: "bench"}
					if networks > 1 {
						pod.Networks = atts
					}
					if _, err := m.SetUpPodWithContext(ctx, pod); err != nil {
						b.Fatal(err)
					}
					if err := m.TearDownPodWithContext(ctx, pod); err != nil {
						b.Fatal(err)
					}
					env.Exec.ResetCalls()
				}
				reportCPU(b, cpu)
			}
			b.Run("ocicni", func(b *testing.B) { managed(b, env.NewManager(b)) })
			// With OpenTelemetry's SDK providers installed (see
			// BenchmarkTelemetryCost): what the spans and metrics add.
			b.Run("ocicni-otel", func(b *testing.B) {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() {
					_ = tp.Shutdown(context.Background())
					_ = mp.Shutdown(context.Background())
				})
				managed(b, env.NewManager(b, ocicni.WithTracerProvider(tp), ocicni.WithMeterProvider(mp)))
			})
		})
	}
}

// reportCPU reports the process's CPU time per pod since start: with a
// fake executor, all of it is libcni's work and the manager's, in user
// space and in the kernel (the record's syncs, the netns path checks).
func reportCPU(b *testing.B, start testenv.CPUTime) {
	b.Helper()
	used := testenv.CPUNow(b).Sub(start)
	b.ReportMetric(float64(used.Self.Microseconds())/float64(b.N), "cpu-µs/op")
}
