package telemetry

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Recorder makes the engine's spans and records its metrics. Its methods
// are safe for concurrent use. A nil *Recorder records nothing, so a
// caller never checks.
type Recorder struct {
	tracer  trace.Tracer
	metrics bool // a meter provider was given: without one, no attribute set is built
	meter   metric.Meter

	opDuration     metric.Float64Histogram
	pluginDuration metric.Float64Histogram
	delFailures    metric.Int64Counter
	rollbacks      metric.Int64UpDownCounter
	gcRuns         metric.Int64Counter
	gcAttachments  metric.Int64Counter
	reloads        metric.Int64Counter
	pending        metric.Int64ObservableGauge
	pendingOldest  metric.Float64ObservableGauge
	skipped        metric.Int64ObservableGauge
	degraded       metric.Int64ObservableGauge
	registration   metric.Registration // the gauges' callback; nil without one
	closed         sync.Once
}

// Gauges are the functions the gauges read their values from, at each
// collection; a nil one leaves its gauges unreported. They must be safe
// for concurrent use and fast: they run on the exporter's goroutine.
type Gauges struct {
	// Pending returns how many sandboxes have a failed DEL awaiting a
	// retry, and how long ago the oldest of them first failed.
	Pending func() (n int, oldest time.Duration)
	// Skipped returns how many config files are skipped, by reason.
	Skipped func() map[string]int
	// Degraded returns whether each part that works around a node's
	// fault does so now (DegradedLocks, DegradedWatcher).
	Degraded func() map[string]bool
}

// durationBuckets are the histograms' bounds, in seconds: plugin runs
// and pod operations take milliseconds to tens of seconds.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// New returns a recorder over tp and mp. A nil tp makes no spans; a nil
// mp records no metrics (its instruments are the API's no-op).
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Recorder, error) {
	r := &Recorder{metrics: mp != nil, meter: noop.NewMeterProvider().Meter(ScopeName)}
	if tp != nil {
		r.tracer = tp.Tracer(ScopeName)
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	r.meter = meter
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	var err error
	r.opDuration = hist(MetricOperationDuration, "Duration of the engine's public operations.")
	r.pluginDuration = hist(MetricPluginDuration, "Duration of one plugin run.")
	r.delFailures = counter(MetricDELFailures, "{failure}", "DELs that failed, by class.")
	r.gcRuns = counter(MetricGCRuns, "{run}", "GC runs.")
	r.gcAttachments = counter(MetricGCAttachments, "{attachment}", "Attachments GC deleted, kept for valid pods, or failed to delete.")
	r.reloads = counter(MetricReloads, "{reload}", "Network configurations published.")
	r.rollbacks, err = meter.Int64UpDownCounter(MetricRollbacks, metric.WithUnit("{rollback}"),
		metric.WithDescription("Rollbacks of failed setups in flight."))
	errs = append(errs, err)
	r.pending, err = meter.Int64ObservableGauge(MetricPending, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Sandboxes with a failed DEL awaiting a background retry."))
	errs = append(errs, err)
	r.pendingOldest, err = meter.Float64ObservableGauge(MetricPendingOldest, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest failed DEL awaiting a background retry."))
	errs = append(errs, err)
	r.skipped, err = meter.Int64ObservableGauge(MetricSkipped, metric.WithUnit("{file}"),
		metric.WithDescription("Config files skipped, by reason."))
	errs = append(errs, err)
	r.degraded, err = meter.Int64ObservableGauge(MetricDegraded, metric.WithUnit("1"),
		metric.WithDescription("1 while a part works around a node's fault: lock files it cannot use, a watcher it cannot make."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// Observe makes the gauges report what g returns, at each collection,
// until [Recorder.Close]. Call it at most once.
func (r *Recorder) Observe(g Gauges) error {
	if r == nil || !r.metrics || (g.Pending == nil && g.Skipped == nil && g.Degraded == nil) {
		return nil
	}
	var err error
	r.registration, err = r.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if g.Pending != nil {
			n, oldest := g.Pending()
			o.ObserveInt64(r.pending, int64(n))
			o.ObserveFloat64(r.pendingOldest, oldest.Seconds())
		}
		if g.Skipped != nil {
			for reason, n := range g.Skipped() {
				o.ObserveInt64(r.skipped, int64(n), metric.WithAttributes(attribute.String(AttrSkipReason, reason)))
			}
		}
		if g.Degraded != nil {
			for part, on := range g.Degraded() {
				v := int64(0)
				if on {
					v = 1
				}
				o.ObserveInt64(r.degraded, v, metric.WithAttributes(attribute.String(AttrDegradedPart, part)))
			}
		}
		return nil
	}, r.pending, r.pendingOldest, r.skipped, r.degraded)
	return err
}

// Close unregisters the gauges' callback.
func (r *Recorder) Close() error {
	if r == nil || r.registration == nil {
		return nil
	}
	var err error
	r.closed.Do(func() { err = r.registration.Unregister() })
	return err
}

// start starts span name under ctx's span; or, with root, as a new
// trace linked to link (when valid): a background span.
func (r *Recorder) start(ctx context.Context, name string, root bool, link trace.SpanContext, kind trace.SpanKind,
	attrs func() []attribute.KeyValue,
) (context.Context, trace.Span) {
	if r == nil || r.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if root {
		opts = append(opts, trace.WithNewRoot())
		if link.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
		}
	}
	ctx, span := r.tracer.Start(ctx, name, opts...)
	if span.IsRecording() && attrs != nil {
		span.SetAttributes(attrs()...)
	}
	return ctx, span
}

// Operation is one public operation in flight; see [Recorder.StartOperation].
type Operation struct {
	r     *Recorder
	name  string
	span  trace.Span
	start time.Time
}

// StartOperation starts the span spanName of operation op, and its
// duration. attrs are the span's, built only when it records. End it with
// [Operation.End].
func (r *Recorder) StartOperation(ctx context.Context, spanName, op string, attrs func() []attribute.KeyValue) (context.Context, *Operation) {
	if r == nil {
		return ctx, nil
	}
	o := &Operation{r: r, name: op, start: time.Now()}
	ctx, o.span = r.start(ctx, spanName, false, trace.SpanContext{}, trace.SpanKindInternal, func() []attribute.KeyValue {
		kv := []attribute.KeyValue{attribute.String(AttrOperation, op)}
		if attrs != nil {
			kv = append(kv, attrs()...)
		}
		return kv
	})
	return ctx, o
}

// End ends the operation with outcome (an Outcome constant) and err, the
// error it returns (nil on success).
func (o *Operation) End(ctx context.Context, outcome string, err error) {
	if o == nil {
		return
	}
	endSpan(o.span, outcome, err)
	if o.r.metrics {
		o.r.opDuration.Record(ctx, time.Since(o.start).Seconds(), metric.WithAttributes(
			attribute.String(AttrOperation, o.name), attribute.String(AttrOutcome, outcome)))
	}
}

func endSpan(span trace.Span, outcome string, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String(AttrOutcome, outcome))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// Plugin describes one plugin run, for its span and its duration.
type Plugin struct {
	Verb, Network, Type, Reason string
	ContainerID, IfName         string
}

// PluginRun is one plugin run in flight; see [Recorder.StartPlugin].
type PluginRun struct {
	r    *Recorder
	p    Plugin
	span trace.Span
}

// StartPlugin starts the span of a plugin run, a child of ctx's span.
// The plugin is to run under the returned context, so that its
// TRACEPARENT is this span's.
func (r *Recorder) StartPlugin(ctx context.Context, p Plugin) (context.Context, *PluginRun) {
	if r == nil {
		return ctx, nil
	}
	run := &PluginRun{r: r, p: p}
	ctx, run.span = r.start(ctx, SpanPlugin+" "+p.Verb, false, trace.SpanContext{}, trace.SpanKindClient, func() []attribute.KeyValue {
		kv := []attribute.KeyValue{
			attribute.String(AttrVerb, p.Verb), attribute.String(AttrPluginType, p.Type),
			attribute.String(AttrNetwork, p.Network), attribute.String(AttrReason, p.Reason),
		}
		if p.ContainerID != "" {
			kv = append(kv, attribute.String(AttrContainerID, p.ContainerID))
		}
		if p.IfName != "" {
			kv = append(kv, attribute.String(AttrIfName, p.IfName))
		}
		return kv
	})
	return ctx, run
}

// End ends the run, which took d, with outcome, err and the plugin's CNI
// error code (0: none).
func (run *PluginRun) End(ctx context.Context, d time.Duration, outcome string, code uint, err error) {
	if run == nil {
		return
	}
	if code != 0 && run.span != nil && run.span.IsRecording() {
		run.span.SetAttributes(attribute.Int(AttrErrorCode, int(code)))
	}
	endSpan(run.span, outcome, err)
	if run.r.metrics {
		run.r.pluginDuration.Record(ctx, d.Seconds(), metric.WithAttributes(
			attribute.String(AttrVerb, run.p.Verb), attribute.String(AttrNetwork, run.p.Network),
			attribute.String(AttrPluginType, run.p.Type), attribute.String(AttrReason, run.p.Reason),
			attribute.String(AttrOutcome, outcome)))
	}
}

// Background is a rollback or heal retry in flight; see [Recorder.StartBackground].
type Background struct {
	span     trace.Span
	rollback *Recorder // set for a rollback: the gauge to bring down at End
}

// StartRollback starts the span of a rollback of sandbox id's setup, a
// child of ctx's span (the setup's, also when the rollback finishes in
// the background after the setup returned); it counts in
// [MetricRollbacks] until End.
func (r *Recorder) StartRollback(ctx context.Context, id string, networks int) (context.Context, *Background) {
	if r == nil {
		return ctx, nil
	}
	if r.metrics {
		r.rollbacks.Add(ctx, 1)
	}
	ctx, span := r.start(ctx, SpanRollback, false, trace.SpanContext{}, trace.SpanKindInternal, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String(AttrContainerID, id), attribute.Int(AttrNetworks, networks)}
	})
	return ctx, &Background{span: span, rollback: r}
}

// StartHeal starts the span of a background DEL retry of sandbox id: a
// new trace, linked to link, the span of the operation whose DEL failed
// (when known).
func (r *Recorder) StartHeal(ctx context.Context, link trace.SpanContext, id string) (context.Context, *Background) {
	if r == nil {
		return ctx, nil
	}
	ctx, span := r.start(ctx, SpanHeal, true, link, trace.SpanKindInternal,
		func() []attribute.KeyValue { return []attribute.KeyValue{attribute.String(AttrContainerID, id)} })
	return ctx, &Background{span: span}
}

// End ends the span with outcome and err.
func (b *Background) End(ctx context.Context, outcome string, err error) {
	if b == nil {
		return
	}
	endSpan(b.span, outcome, err)
	if b.rollback != nil && b.rollback.metrics {
		b.rollback.rollbacks.Add(ctx, -1)
	}
}

// DELFailed counts a failed DEL of network, run for reason, of class.
func (r *Recorder) DELFailed(ctx context.Context, network, reason, class string) {
	if r == nil || !r.metrics {
		return
	}
	r.delFailures.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrNetwork, network),
		attribute.String(AttrReason, reason), attribute.String(AttrDELClass, class)))
}

// GCRan counts a GC run that ended with outcome, and what it did to the
// attachments.
func (r *Recorder) GCRan(ctx context.Context, outcome string, deleted, kept, failed int) {
	if r == nil || !r.metrics {
		return
	}
	r.gcRuns.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrOutcome, outcome)))
	for _, c := range []struct {
		result string
		n      int
	}{{GCDeleted, deleted}, {GCKept, kept}, {GCFailed, failed}} {
		r.gcAttachments.Add(ctx, int64(c.n), metric.WithAttributes(attribute.String(AttrGCResult, c.result)))
	}
}

// Reloaded counts a published network configuration.
func (r *Recorder) Reloaded(ctx context.Context) {
	if r == nil || !r.metrics {
		return
	}
	r.reloads.Add(ctx, 1)
}
