package cni

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// WithTracerProvider makes the face's spans and the engine's with tp
// instead of OpenTelemetry's global provider: a span per face verb
// ("gocni.Setup", "gocni.Remove", ...), the engine's operation under it
// and a span per plugin run under that (see
// [ocicni.WithTracerProvider]). It is an addition to go-cni's options, and has
// effect at New only.
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return func(c *config) error {
		c.tracerProvider = tp
		c.engineOpts = append(c.engineOpts, ocicni.WithTracerProvider(tp))
		return nil
	}
}

// WithMeterProvider records the engine's metrics with mp (see
// [ocicni.WithMeterProvider]); by default none are recorded. It is an
// addition to go-cni's options, and has effect at New only.
func WithMeterProvider(mp metric.MeterProvider) Opt {
	return func(c *config) error {
		c.engineOpts = append(c.engineOpts, ocicni.WithMeterProvider(mp))
		return nil
	}
}

// newRecorder returns the face's recorder: spans only, since the engine
// records the operations' durations.
func newRecorder(tp trace.TracerProvider) (*telemetry.Recorder, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return telemetry.New(tp, nil)
}

// startVerb starts the span of face verb on sandbox id ("" for none).
func (f *Face) startVerb(ctx context.Context, verb, id string) (context.Context, *telemetry.Operation) {
	return f.tel.StartOperation(ctx, "gocni."+verb, verb, func() []attribute.KeyValue {
		kv := []attribute.KeyValue{attribute.String(telemetry.AttrFace, "gocni")}
		if id != "" {
			kv = append(kv, attribute.String(telemetry.AttrContainerID, id))
		}
		return kv
	})
}

// endVerb ends a face verb's span with err.
func endVerb(ctx context.Context, op *telemetry.Operation, err error) {
	op.End(ctx, telemetry.OutcomeOf(err), err)
}
