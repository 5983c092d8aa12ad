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

// WithTracerProvider makes the manager's spans (see the package doc,
// "Observability") with tp instead of OpenTelemetry's global provider,
// which it uses by default. nil keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.tracerProvider = tp
		return nil
	}
}

// WithMeterProvider records the manager's metrics (see the package doc,
// "Observability") with mp. By default it records none. The library ships
// no exporter: the runtime wires its own to mp. nil keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		o.meterProvider = mp
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
