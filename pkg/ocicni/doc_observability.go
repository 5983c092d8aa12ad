// # Observability
//
// The manager makes OpenTelemetry spans with the tracer provider of
// [WithTracerProvider] (the global one by default) and records metrics
// with the meter provider of [WithMeterProvider] (none by default). It
// uses only the OpenTelemetry API; the runtime wires its SDK and
// exporters. With neither configured it costs what the API's no-op does.
//
// Spans. One per public operation: "cni.setup", "cni.teardown",
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
// or version_pending.
//
// [WithPluginHook] registers a [PluginHook] called after every plugin run
// with the verb, network, plugin, container, ifname, duration, error and
// output, for what the instruments above do not cover. [WithPluginEnv]
// adds environment variables to every plugin run, such as GOMAXPROCS=2
// on hosts with many cores, where Go plugins otherwise spend most of
// their start-up in the Go runtime.
package ocicni
