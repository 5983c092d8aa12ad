package ocicni

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// WithTracerProvider makes the manager's spans with tp instead of
// OpenTelemetry's global provider, which it uses by default. nil keeps
// the default.
//
// One span per public operation: "cni.setup", "cni.teardown",
// "cni.pod_status", "cni.status" and "cni.gc", a child of the caller's
// context's span, with cni.operation, cni.container.id and cni.outcome.
// Under it, one per plugin run, "cni.plugin ADD" (or DEL, CHECK, GC,
// STATUS, VERSION), with cni.verb, cni.network, cni.ifname,
// cni.plugin.type, cni.container.id, cni.reason, cni.outcome and, when
// the plugin returned one, cni.error.code; the plugin runs under it, so
// its TRACEPARENT is this span's. A rollback is "cni.rollback", a child
// of its setup's span (also when it finishes in the background). A heal
// retry is "cni.heal", a trace of its own linked to the span of the
// operation whose DEL failed last, with its plugin runs under it. A
// failed operation or run sets the span's status to Error. Package gocni
// adds a span per face verb ("gocni.Setup", ...) above the engine's.
//
// cni.outcome is one of ok, error, plugin_error (the plugin answered with
// a CNI error), timeout, canceled, not_found (the plugin binary is
// missing) and output_limit (see [MaxPluginStdout]). cni.reason is why the
// engine ran a plugin, as [PluginRun].Reason says.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.tracerProvider = tp
		return nil
	}
}

// WithMeterProvider records the manager's metrics with mp. By default it
// records none. The library ships no exporter: the runtime wires its own
// to mp. nil keeps the default.
//
// Metrics carry no container ID and no interface name, so their
// cardinality is bounded by the networks and plugin types:
//
//	instrument                 kind            unit          attributes
//	cni.operation.duration     histogram       s             cni.operation, cni.outcome
//	cni.plugin.duration        histogram       s             cni.verb, cni.network, cni.plugin.type, cni.reason, cni.outcome
//	cni.del.failures           counter         {failure}     cni.network, cni.reason, cni.del.class
//	cni.teardown.pending       gauge           {sandbox}     -
//	cni.teardown.pending.age   gauge           s             -
//	cni.rollback.active        up-down counter {rollback}    -
//	cni.gc.runs                counter         {run}         cni.outcome
//	cni.gc.attachments         counter         {attachment}  cni.gc.result
//	cni.config.reloads         counter         {reload}      -
//	cni.config.skipped         gauge           {file}        cni.config.reason
//	cni.degraded               gauge           1             cni.degraded.part
//
// cni.del.failures counts the DELs that failed (teardown, rollback, GC,
// heal), by [OutcomeClass] (retry-later, failed, orphaned).
// cni.teardown.pending is the sandboxes whose failed DEL awaits a
// background retry (scheduled or running; those past the horizon are not
// counted), and cni.teardown.pending.age how long ago the oldest of them
// first failed; both read the healer's schedule, so they stay zero
// [WithoutHealing]. cni.gc.attachments counts, per GC, the attachments
// deleted (any outcome that is not a failure), kept (those of valid
// pods) and failed. cni.config.reloads counts each network set the loader
// published, and cni.config.skipped the files the current set skips, by
// reason: invalid, plugin_not_found, unsupported_version, version_failed
// or version_pending. cni.degraded is 1 while a part works around a
// node's fault (locks, watcher; see [Manager.Health]), else 0.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		o.meterProvider = mp
		return nil
	}
}

// WithPluginHook registers a hook that is called after every plugin run
// (verb, network, plugin, container, ifname, duration, error, reason),
// for metrics or tracing; nil means none, the default. See [PluginHook].
func WithPluginHook(h PluginHook) Option {
	return func(o *options) error {
		o.pluginHook = h
		return nil
	}
}

// newRecorder returns the recorder over o's providers.
func newRecorder(o *options) (*telemetry.Recorder, error) {
	tp := o.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return telemetry.New(tp, o.meterProvider)
}

// Operation names, as the cni.operation attribute takes them.
const (
	opSetup     = "setup"
	opTeardown  = "teardown"
	opPodStatus = "pod_status"
	opStatus    = "status"
	opGC        = "gc"
)

// startOp starts the span and duration of public operation op on pod (nil
// for none).
func (e *engine) startOp(ctx context.Context, op string, pod *PodNetwork) (context.Context, *telemetry.Operation) {
	var attrs func() []attribute.KeyValue
	if pod != nil {
		id, networks := pod.ID, len(pod.Networks)
		attrs = func() []attribute.KeyValue {
			return []attribute.KeyValue{
				attribute.String(telemetry.AttrContainerID, id), attribute.Int(telemetry.AttrNetworks, networks),
			}
		}
	}
	return e.tel.StartOperation(ctx, "cni."+op, op, attrs)
}

// errorCode returns the CNI error code err carries; 0 for none.
func errorCode(err error) uint {
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		return cniErr.Code
	}
	return 0
}

// The log fields of pod operations follow.

func (e *engine) podLog(pod *PodNetwork) *logrus.Entry {
	return e.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "sandbox": pod.ID})
}

// debugEnabled reports whether log writes Debug lines. Their fields are
// built only then: logrus builds an entry's fields whatever the level.
func debugEnabled(log *logrus.Entry) bool { return log.Logger.IsLevelEnabled(logrus.DebugLevel) }

func planLog(log *logrus.Entry, p *plan, verb string) *logrus.Entry {
	return log.WithFields(logrus.Fields{"network": p.Name, "ifname": p.Ifname, "verb": verb})
}

// Health is what a manager can tell of the node's faults that it works
// around, read at one moment (see [Manager.Health]). Nothing in it stops
// a pod operation: it says what the manager does instead.
type Health struct {
	// LocksDegraded is set while the node-wide lock files under
	// <cache dir>/ocicni/locks cannot be used (the last lock tried failed
	// for a file system reason: a lock dir that cannot be made, a full
	// disk, an I/O error, no flock(2)). Teardowns then run their DELs
	// under this process's locks alone, and setups refuse (see the
	// package doc, Locking). A read-only cache dir whose lock files exist
	// is not degraded: flock needs no write access. LocksError is the
	// last failure.
	LocksDegraded bool
	LocksError    error
	// WatcherPolling is set while the conf dirs are polled because the
	// fsnotify watcher cannot be made or cannot watch them (no inotify
	// instance or watch left); WatcherError is why. The watcher is tried
	// again until it works, and then takes over.
	WatcherPolling bool
	WatcherError   error
}

// health returns the engine's [Health].
func (e *engine) health() Health {
	var h Health
	h.LocksDegraded, h.LocksError = e.store.fault.state()
	h.WatcherPolling, h.WatcherError = e.conf.WatchHealth()
	return h
}
