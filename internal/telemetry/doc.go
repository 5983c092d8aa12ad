// Package telemetry turns what the engine does into OpenTelemetry spans
// and metrics, through the API modules only: the caller's providers do
// the recording and exporting, and with none the cost is the API's no-op.
//
// It knows nothing of the engine: the engine names its operations, plugin
// runs and outcomes in the words of this package (see [Recorder]), and
// hands it the functions that read the gauges' values. The names of the
// spans, instruments and attributes are the constants below; package
// ocicni lists them for users on WithTracerProvider and WithMeterProvider.
package telemetry
