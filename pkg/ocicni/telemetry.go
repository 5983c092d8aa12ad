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
