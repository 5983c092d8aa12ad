//go:build unix

package pluginexec

import (
	"context"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// injectTraceContext adds the OpenTelemetry trace context of ctx to a
// plugin's environment (TRACEPARENT, TRACESTATE, BAGGAGE), as
// invoke.RawExec does, following
// https://github.com/open-telemetry/opentelemetry-specification/blob/main/oteps/0258-env-context-baggage-carriers.md
// Without a valid span context, environ is returned unchanged.
func injectTraceContext(ctx context.Context, environ []string) []string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return environ
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	mc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, mc)

	// The propagator's keys are not exported, hence the literals.
	if v := mc.Get("traceparent"); v != "" {
		environ = append(environ, "TRACEPARENT="+v)
	}
	if v := mc.Get("tracestate"); v != "" {
		environ = append(environ, "TRACESTATE="+v)
	}
	if v := baggage.FromContext(ctx).String(); v != "" {
		environ = append(environ, "BAGGAGE="+v)
	}
	return environ
}
