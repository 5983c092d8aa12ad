package cni_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The face takes the providers as face options: each verb gets a span,
// the engine's operation is its child and the plugin runs are under that,
// and the engine records its metrics with the meter provider.
func TestRealFaceTelemetry(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	n := testenv.Alloc(t)
	dataDir, confDir, cacheDir := t.TempDir(), t.TempDir(), t.TempDir()
	testenv.WriteFile(t, confDir, "10-podnet.conflist", testenv.BridgeConflist("podnet", "1.0.0", n, dataDir))
	c, err := cni.New(
		cni.WithPluginConfDir(confDir), cni.WithPluginDir([]string{pluginDir}),
		cni.WithTracerProvider(tp), cni.WithMeterProvider(mp),
		cni.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing()),
	)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	require.NoError(t, c.Load(cni.WithLoNetwork, cni.WithDefaultConf))

	ns := testenv.NewNS(t)
	_, err = c.Setup(ctx, "gocni-tel", ns)
	require.NoError(t, err)
	require.NoError(t, c.Remove(ctx, "gocni-tel", ns))
	require.NoError(t, f.GC(ctx, nil))
	assert.Empty(t, testenv.Reservations(t, dataDir, "podnet"))

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	for verb, engine := range map[string]string{"Setup": "cni.setup", "Remove": "cni.teardown", "GC": "cni.gc"} {
		require.Len(t, byName["gocni."+verb], 1, verb)
		face := byName["gocni."+verb][0]
		require.Len(t, byName[engine], 1, engine)
		assert.Equal(t, face.SpanContext().SpanID(), byName[engine][0].Parent().SpanID(), "%s runs under gocni.%s", engine, verb)
		assert.Contains(t, face.Attributes(), attribute.String("cni.face", "gocni"))
	}
	add := byName["cni.plugin ADD"]
	require.Len(t, add, 1, "the bridge: the face runs no loopback plugin")
	assert.Equal(t, byName["cni.setup"][0].SpanContext().SpanID(), add[0].Parent().SpanID())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	ops := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "cni.operation.duration" {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			require.True(t, ok)
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("cni.operation")
				ops[op.AsString()] += dp.Count
			}
		}
	}
	assert.Equal(t, map[string]uint64{"setup": 1, "teardown": 1, "gc": 1}, ops, "the engine's operations, each once")
}
