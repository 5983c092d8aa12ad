package ocicni

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// telEnv is an itEnv whose manager records into OpenTelemetry's SDK: its
// spans into a recorder, its metrics into a manual reader.
type telEnv struct {
	*itEnv
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	m      *Manager
}

func newTelEnv(t *testing.T) *telEnv {
	t.Helper()
	e := &telEnv{itEnv: newITEnv(t), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = e.tp.Shutdown(context.Background()) })
	return e
}

func (e *telEnv) start(opts ...Option) *Manager {
	e.t.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	e.t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	e.m = e.itEnv.start(append([]Option{WithTracerProvider(e.tp), WithMeterProvider(mp)}, opts...)...)
	return e.m
}

// root starts a span of the test's own, as a runtime's request would
// carry, and returns its context.
func (e *telEnv) root(name string) (context.Context, trace.Span) {
	return e.tp.Tracer("test").Start(context.Background(), name)
}

// ended returns the ended spans named name.
func (e *telEnv) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// children returns the ended spans whose parent is p, by name.
func (e *telEnv) children(p sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range e.spans.Ended() {
		if s.Parent().SpanID() == p.SpanContext().SpanID() && s.Parent().TraceID() == p.SpanContext().TraceID() {
			out[s.Name()] = append(out[s.Name()], s)
		}
	}
	return out
}

// only returns the one span named name, or fails.
func (e *telEnv) only(name string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	s := e.ended(name)
	require.Len(e.t, s, 1, "spans named %s", name)
	return s[0]
}

func (e *telEnv) collect() metricdata.ResourceMetrics {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(e.t, e.reader.Collect(context.Background(), &rm))
	return rm
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

// traceparent is the W3C trace context of span s, as a plugin reads it
// from TRACEPARENT.
func traceparent(s sdktrace.ReadOnlySpan) string {
	sc := s.SpanContext()
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// requirePluginSpans checks the plugin spans under parent: one per plugin
// that ran (the recorder and, unless its DEL failed and halted the chain,
// the bridge), each with the attributes of its run, and the recorder's
// TRACEPARENT is its own span's.
func (e *telEnv) requirePluginSpans(parent sdktrace.ReadOnlySpan, verb, reason, id, network, outcome string, recorded calllog.Call) {
	e.t.Helper()
	runs := e.children(parent)[telemetry.SpanPlugin+" "+verb]
	want := []string{"bridge", "recorder"}
	if outcome != telemetry.OutcomeOK {
		want = want[1:]
	}
	require.Len(e.t, runs, len(want), "%v, each a child of %s", want, parent.Name())
	byType := map[string]sdktrace.ReadOnlySpan{}
	for _, r := range runs {
		a := attrs(r)
		byType[a[telemetry.AttrPluginType].AsString()] = r
		assert.Equal(e.t, verb, a[telemetry.AttrVerb].AsString())
		assert.Equal(e.t, network, a[telemetry.AttrNetwork].AsString())
		assert.Equal(e.t, reason, a[telemetry.AttrReason].AsString())
		assert.Equal(e.t, id, a[telemetry.AttrContainerID].AsString())
		assert.Equal(e.t, "eth0", a[telemetry.AttrIfName].AsString())
		assert.Equal(e.t, trace.SpanKindClient, r.SpanKind())
	}
	for _, typ := range want {
		require.Contains(e.t, byType, typ)
	}
	assert.Equal(e.t, outcome, attrs(byType["recorder"])[telemetry.AttrOutcome].AsString())
	assert.Equal(e.t, traceparent(byType["recorder"]), recorded.TraceParent, "the plugin runs under its own span")
}

// lastCall returns the recorder's last call of verb for sandbox id.
func (e *telEnv) lastCall(verb, id string) calllog.Call {
	e.t.Helper()
	calls := e.callsFor(verb, id)
	require.NotEmpty(e.t, calls, "%s calls of %s", verb, id)
	return calls[len(calls)-1]
}

// A setup with real plugins makes one span under the caller's, with a
// child per plugin run whose TRACEPARENT the plugin sees, and records the
// operation's and the plugins' durations.
func TestTelemetrySetup(t *testing.T) {
	t.Parallel()
	e := newTelEnv(t)
	e.recordedBridge("net", nil)
	m := e.start()
	pod := e.pod("p")
	ctx, root := e.root("RunPodSandbox")
	_, err := m.SetUpPodWithContext(ctx, pod)
	root.End()
	require.NoError(t, err)

	setup := e.only("cni." + opSetup)
	assert.Equal(t, root.SpanContext().SpanID(), setup.Parent().SpanID(), "the setup's span is a child of the caller's")
	a := attrs(setup)
	assert.Equal(t, opSetup, a[telemetry.AttrOperation].AsString())
	assert.Equal(t, pod.ID, a[telemetry.AttrContainerID].AsString())
	assert.Equal(t, telemetry.OutcomeOK, a[telemetry.AttrOutcome].AsString())
	assert.Equal(t, codes.Unset, setup.Status().Code)
	e.requirePluginSpans(setup, "ADD", reasonSetup, pod.ID, "net", telemetry.OutcomeOK, e.lastCall("ADD", pod.ID))

	rm := e.collect()
	assert.Equal(t, uint64(1), histCount(t, rm, telemetry.MetricOperationDuration,
		attribute.String(telemetry.AttrOperation, opSetup), attribute.String(telemetry.AttrOutcome, telemetry.OutcomeOK)))
	for _, typ := range []string{"bridge", "recorder"} {
		assert.Equal(t, uint64(1), histCount(t, rm, telemetry.MetricPluginDuration,
			attribute.String(telemetry.AttrVerb, "ADD"), attribute.String(telemetry.AttrNetwork, "net"),
			attribute.String(telemetry.AttrPluginType, typ), attribute.String(telemetry.AttrReason, reasonSetup),
			attribute.String(telemetry.AttrOutcome, telemetry.OutcomeOK)), typ)
	}
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricReloads), "the first load published once")
	assertNoContainerIDs(t, rm)
}

// A teardown whose DEL fails counts the failure and a pending teardown;
// the heal retry that releases it is a new trace linked to the
// teardown's span, its plugin runs its children, and the gauges fall to
// zero.
func TestTelemetryFailedTeardownAndHeal(t *testing.T) {
	t.Parallel()
	e := newTelEnv(t)
	flag := e.failingDELNet("flaky")
	m := e.start(WithHealing(HealPolicy{Initial: time.Hour, StartDelay: time.Millisecond})) // the retry falls due when the test says
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "flaky"}}
	e.setUp(pod)

	ctx, root := e.root("StopPodSandbox")
	err := m.TearDownPodWithContext(ctx, pod)
	root.End()
	assert.Equal(t, RetryLater, onlyFailure(t, err, "flaky").Class)
	teardown := e.only("cni." + opTeardown)
	assert.Equal(t, telemetry.OutcomePluginError, attrs(teardown)[telemetry.AttrOutcome].AsString())
	assert.Equal(t, codes.Error, teardown.Status().Code)
	e.requirePluginSpans(teardown, "DEL", reasonTeardown, pod.ID, "flaky", telemetry.OutcomePluginError, e.lastCall("DEL", pod.ID))
	for _, r := range e.children(teardown)[telemetry.SpanPlugin+" DEL"] {
		if attrs(r)[telemetry.AttrPluginType].AsString() == "recorder" {
			assert.Equal(t, int64(11), attrs(r)[telemetry.AttrErrorCode].AsInt64(), "the plugin's error code")
		}
	}

	rm := e.collect()
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricDELFailures, attribute.String(telemetry.AttrNetwork, "flaky"),
		attribute.String(telemetry.AttrReason, reasonTeardown), attribute.String(telemetry.AttrDELClass, RetryLater.String())))
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricPending))
	assert.Positive(t, total[float64](t, rm, telemetry.MetricPendingOldest))
	assert.Equal(t, uint64(1), histCount(t, rm, telemetry.MetricOperationDuration,
		attribute.String(telemetry.AttrOperation, opTeardown), attribute.String(telemetry.AttrOutcome, telemetry.OutcomePluginError)))

	require.NoError(t, os.Remove(flag))
	makeDue(t, m, pod.ID)
	e.requireHealed(m, pod, "flaky")
	require.Eventually(t, func() bool { return len(e.ended(telemetry.SpanHeal)) == 1 }, time.Minute, 5*time.Millisecond,
		"the retry's span ends")
	heal := e.only(telemetry.SpanHeal)
	assert.False(t, heal.Parent().IsValid(), "a heal retry is a trace of its own")
	require.Len(t, heal.Links(), 1)
	assert.Equal(t, teardown.SpanContext().SpanID(), heal.Links()[0].SpanContext.SpanID(), "linked to the teardown whose DEL failed")
	assert.Equal(t, pod.ID, attrs(heal)[telemetry.AttrContainerID].AsString())
	assert.Equal(t, telemetry.OutcomeOK, attrs(heal)[telemetry.AttrOutcome].AsString())
	e.requirePluginSpans(heal, "DEL", reasonHeal, pod.ID, "flaky", telemetry.OutcomeOK, e.lastCall("DEL", pod.ID))

	rm = e.collect()
	_, reported := find(t, rm, telemetry.MetricPending)
	require.True(t, reported, "the gauges are still reported, at zero")
	assert.Zero(t, total[int64](t, rm, telemetry.MetricPending))
	assert.Zero(t, total[float64](t, rm, telemetry.MetricPendingOldest))
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricDELFailures), "the retry succeeded: no new failure")
	assertNoContainerIDs(t, rm)
}

// A setup whose second network's ADD fails rolls back under a span of its
// own, a child of the setup's, with the rollback's DELs under it; the
// rollbacks in flight are back to zero.
func TestTelemetryRollback(t *testing.T) {
	t.Parallel()
	e := newTelEnv(t)
	e.recordedBridge("good", nil)
	e.addConf("bad", e.recorder("bad", "1.0.0", map[string]any{"add": map[string]any{"errorCode": 7, "errorMsg": "no"}}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "bad", Ifname: "net1"}}
	_, err := m.SetUpPodWithContext(context.Background(), pod)
	require.Error(t, err)

	setup := e.only("cni." + opSetup)
	assert.Equal(t, telemetry.OutcomePluginError, attrs(setup)[telemetry.AttrOutcome].AsString())
	rollback := e.only(telemetry.SpanRollback)
	assert.Equal(t, setup.SpanContext().SpanID(), rollback.Parent().SpanID())
	assert.Equal(t, int64(2), attrs(rollback)[telemetry.AttrNetworks].AsInt64(), "the failed network and the one before it")
	assert.Equal(t, telemetry.OutcomeOK, attrs(rollback)[telemetry.AttrOutcome].AsString())
	var nets []string
	for _, r := range e.children(rollback)[telemetry.SpanPlugin+" DEL"] {
		assert.Equal(t, reasonRollback, attrs(r)[telemetry.AttrReason].AsString())
		nets = append(nets, attrs(r)[telemetry.AttrNetwork].AsString())
	}
	assert.ElementsMatch(t, []string{"bad", "good", "good"}, nets, "bad's recorder, then good's bridge and recorder")
	assert.Zero(t, total[int64](t, e.collect(), telemetry.MetricRollbacks))
	e.assertClean(pod, "good", "bad")
}

// GC makes one span with its DELs under it, and counts what it deleted,
// kept and failed.
func TestTelemetryGC(t *testing.T) {
	t.Parallel()
	e := newTelEnv(t)
	e.recordedBridge("net", nil)
	m := e.start()
	valid, stale := e.pod("valid"), e.pod("stale")
	e.setUp(valid)
	e.setUp(stale)
	require.NoError(t, m.GC(context.Background(), []*PodNetwork{&valid}))

	gc := e.only("cni." + opGC)
	assert.Equal(t, telemetry.OutcomeOK, attrs(gc)[telemetry.AttrOutcome].AsString())
	e.requirePluginSpans(gc, "DEL", reasonGC, stale.ID, "net", telemetry.OutcomeOK, e.lastCall("DEL", stale.ID))
	rm := e.collect()
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricGCRuns, attribute.String(telemetry.AttrOutcome, telemetry.OutcomeOK)))
	for result, want := range map[string]int64{telemetry.GCDeleted: 1, telemetry.GCKept: 1, telemetry.GCFailed: 0} {
		assert.Equal(t, want, total[int64](t, rm, telemetry.MetricGCAttachments, attribute.String(telemetry.AttrGCResult, result)), result)
	}
	assert.Len(t, testenv.Reservations(t, e.dataDir, "net"), 1, "the stale pod's address is released, the valid one's kept")
	assert.Equal(t, []string{e.cacheName("net", valid, "eth0")}, e.cacheFiles())
}

// Status gets a span and a duration; a config file that cannot be used
// shows in the skipped gauge by reason, and every load that publishes is
// counted.
func TestTelemetryStatusAndConfig(t *testing.T) {
	t.Parallel()
	e := newTelEnv(t)
	e.recordedBridge("net", nil)
	e.addConf("broken", `{"cniVersion": "1.0.0", "name": "broken", "plugins": [`)
	e.addConf("missing", `{"cniVersion": "1.0.0", "name": "missing", "type": "no-such-plugin"}`)
	m := e.start()
	require.NoError(t, m.Status())
	status := e.only("cni." + opStatus)
	assert.Equal(t, telemetry.OutcomeOK, attrs(status)[telemetry.AttrOutcome].AsString())

	rm := e.collect()
	assert.Equal(t, uint64(1), histCount(t, rm, telemetry.MetricOperationDuration, attribute.String(telemetry.AttrOperation, opStatus)))
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricSkipped, attribute.String(telemetry.AttrSkipReason, "invalid")))
	assert.Equal(t, int64(1), total[int64](t, rm, telemetry.MetricSkipped, attribute.String(telemetry.AttrSkipReason, "plugin_not_found")))
	before := total[int64](t, rm, telemetry.MetricReloads)
	require.NoError(t, os.Remove(e.confDir+"/20-broken.conflist"))
	require.NoError(t, m.Reload(context.Background()))
	rm = e.collect()
	assert.Equal(t, before+1, total[int64](t, rm, telemetry.MetricReloads))
	assert.Zero(t, total[int64](t, rm, telemetry.MetricSkipped, attribute.String(telemetry.AttrSkipReason, "invalid")))
}

// metric readers

func find(t *testing.T, rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set holds every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histCount returns the count of the data points of histogram name that
// carry want.
func histCount(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	m, ok := find(t, rm, name)
	if !ok {
		return 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram", name)
	var n uint64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
		}
	}
	return n
}

// total returns the total of the data points of sum or gauge name that
// carry want; 0 when name is not reported.
func total[N int64 | float64](t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) N {
	t.Helper()
	m, ok := find(t, rm, name)
	if !ok {
		return 0
	}
	var points []metricdata.DataPoint[N]
	switch d := m.Data.(type) {
	case metricdata.Sum[N]:
		points = d.DataPoints
	case metricdata.Gauge[N]:
		points = d.DataPoints
	default:
		require.Failf(t, "unexpected data", "%s holds %T", name, m.Data)
	}
	var n N
	for _, dp := range points {
		if matches(dp.Attributes, want) {
			n += dp.Value
		}
	}
	return n
}

// assertNoContainerIDs checks that no metric carries a container ID or an
// interface name: their cardinality is unbounded.
func assertNoContainerIDs(t *testing.T, rm metricdata.ResourceMetrics) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, s := range sets {
				_, id := s.Value(telemetry.AttrContainerID)
				_, ifname := s.Value(telemetry.AttrIfName)
				assert.False(t, id || ifname, "%s carries a container ID or an ifname", m.Name)
			}
		}
	}
}
