package ocicni_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// discard is a span exporter that drops what it is given, as a collector
// that keeps up would.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTelemetryCost times each pod's setup and teardown (one bridge
// network, real plugins) through two managers on the same configs, paired
// and in alternating order: one without providers (OpenTelemetry's global
// no-op tracer, no meter) and one with the SDK's (a batch span processor
// exporting to nowhere, a meter provider whose manual reader collects
// every 100 pods, as a scrape would). It reports the median of the
// per-pod ratios (with over without) of the whole cycle, and of setup
// alone. The cost without providers is BenchmarkPodOverhead's, compared
// across commits (see BENCHMARKS.md).
func BenchmarkTelemetryCost(b *testing.B) {
	e := newBenchEnv(b, 1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	with := newQuietManager(b, e.confDir, filepath.Join(b.TempDir(), "cache"),
		ocicni.WithTracerProvider(tp), ocicni.WithMeterProvider(mp))
	ctx := context.Background()
	cycle := func(m *ocicni.Manager, id, nsPath string) (up, total time.Duration) {
		pod := ocicni.PodNetwork{ID: id, NetNS: nsPath, Name: id, Namespace: "bench"}
		start := time.Now()
		_, err := m.SetUpPodWithContext(ctx, pod)
		require.NoError(b, err)
		up = time.Since(start)
		require.NoError(b, m.TearDownPodWithContext(ctx, pod))
		return up, time.Since(start)
	}
	var ratios, upRatios, plainMs, withMs []float64
	for i := 0; b.Loop(); i++ {
		nsA, nsB := newBenchNetNS(b), newBenchNetNS(b)
		var upA, totA, upB, totB time.Duration
		if i%2 == 0 {
			upA, totA = cycle(e.m, fmt.Sprintf("plain%d", i), nsA)
			upB, totB = cycle(with, fmt.Sprintf("with%d", i), nsB)
		} else {
			upB, totB = cycle(with, fmt.Sprintf("with%d", i), nsB)
			upA, totA = cycle(e.m, fmt.Sprintf("plain%d", i), nsA)
		}
		removeBenchNetNS(b, nsA, nsB)
		ratios = append(ratios, float64(totB)/float64(totA))
		upRatios = append(upRatios, float64(upB)/float64(upA))
		plainMs, withMs = append(plainMs, testenv.Millis(totA)), append(withMs, testenv.Millis(totB))
		if i%100 == 99 {
			var rm metricdata.ResourceMetrics
			require.NoError(b, reader.Collect(ctx, &rm))
		}
	}
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "median-ratio")
	b.ReportMetric(testenv.Quantile(upRatios, 0.5), "setup-ratio")
	b.ReportMetric(testenv.Quantile(plainMs, 0.5), "without-ms")
	b.ReportMetric(testenv.Quantile(withMs, 0.5), "with-ms")
}
