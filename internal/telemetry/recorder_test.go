package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// A nil recorder, and one without providers, do nothing and never fail:
// the engine calls them unconditionally.
func TestRecorderWithoutProviders(t *testing.T) {
	ctx := context.Background()
	for name, r := range map[string]*Recorder{"nil": nil, "none": mustNew(t, nil, nil), "noop": mustNew(t, noop.NewTracerProvider(), nil)} {
		t.Run(name, func(t *testing.T) {
			octx, op := r.StartOperation(ctx, "cni.setup", "setup", nil)
			pctx, run := r.StartPlugin(octx, Plugin{Verb: "ADD"})
			run.End(pctx, time.Millisecond, OutcomeOK, 0, nil)
			op.End(octx, OutcomeError, errors.New("x"))
			_, rb := r.StartRollback(ctx, "id", 1)
			rb.End(ctx, OutcomeOK, nil)
			_, h := r.StartHeal(ctx, trace.SpanContext{}, "id")
			h.End(ctx, OutcomeOK, nil)
			r.DELFailed(ctx, "n", "teardown", "failed")
			r.GCRan(ctx, OutcomeOK, 1, 2, 3)
			r.Reloaded(ctx)
			require.NoError(t, r.Observe(Gauges{Pending: func() (int, time.Duration) { return 1, time.Second }}))
			require.NoError(t, r.Close())
		})
	}
}

// The gauges report what their functions return at each collection, and
// nothing once the recorder is closed.
func TestRecorderGauges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	r := mustNew(t, nil, mp)
	pending := 3
	require.NoError(t, r.Observe(Gauges{
		Pending: func() (int, time.Duration) { return pending, 90 * time.Second },
		Skipped: func() map[string]int { return map[string]int{"invalid": 2} },
	}))
	values := func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		out := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						out[m.Name] += float64(dp.Value)
					}
				case metricdata.Gauge[float64]:
					for _, dp := range d.DataPoints {
						out[m.Name] += dp.Value
					}
				}
			}
		}
		return out
	}
	assert.Equal(t, map[string]float64{MetricPending: 3, MetricPendingOldest: 90, MetricSkipped: 2}, values())
	pending = 0
	assert.InDelta(t, 0, values()[MetricPending], 0)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "twice")
	assert.Empty(t, values())
}

// A heal span is a new trace linked to the given span, even when ctx
// carries another; a rollback's is a child of ctx's.
func TestRecorderBackgroundSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := mustNew(t, tp, nil)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	_, rb := r.StartRollback(ctx, "id", 2)
	rb.End(ctx, OutcomeOK, nil)
	_, h := r.StartHeal(ctx, parent.SpanContext(), "id")
	h.End(ctx, OutcomePluginError, errors.New("busy"))
	parent.End()

	ended := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		ended[s.Name()] = s
	}
	assert.Equal(t, parent.SpanContext().SpanID(), ended[SpanRollback].Parent().SpanID())
	heal := ended[SpanHeal]
	assert.NotEqual(t, parent.SpanContext().TraceID(), heal.SpanContext().TraceID(), "a trace of its own")
	require.Len(t, heal.Links(), 1)
	assert.Equal(t, parent.SpanContext(), heal.Links()[0].SpanContext)
	assert.Contains(t, heal.Attributes(), attribute.String(AttrOutcome, OutcomePluginError))
	assert.Equal(t, "busy", heal.Status().Description)
}

func mustNew(t *testing.T, tp trace.TracerProvider, mp metric.MeterProvider) *Recorder {
	t.Helper()
	r, err := New(tp, mp)
	require.NoError(t, err)
	return r
}
