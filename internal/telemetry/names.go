package telemetry

// ScopeName is the instrumentation scope of every tracer and meter.
const ScopeName = "github.com/seed-671fdd43/ocicni"

// Attribute keys. Metrics carry only those of bounded cardinality: never
// a container ID or an interface name.
const (
	AttrOperation    = "cni.operation"      // setup, teardown, pod_status, status, gc, or a face's verb
	AttrOutcome      = "cni.outcome"        // see the Outcome constants
	AttrVerb         = "cni.verb"           // ADD, DEL, CHECK, GC, STATUS, VERSION
	AttrNetwork      = "cni.network"        // the network's name
	AttrPluginType   = "cni.plugin.type"    // the plugin binary's base name
	AttrReason       = "cni.reason"         // why the engine ran it: setup, teardown, rollback, gc, heal, status
	AttrContainerID  = "cni.container.id"   // spans only
	AttrIfName       = "cni.ifname"         // spans only
	AttrErrorCode    = "cni.error.code"     // the plugin's CNI error code, when it returned one
	AttrDELClass     = "cni.del.class"      // a failed DEL's class: retry-later, failed, orphaned
	AttrGCResult     = "cni.gc.result"      // deleted, kept, failed
	AttrSkipReason   = "cni.config.reason"  // why a config file is skipped
	AttrDegradedPart = "cni.degraded.part"  // which part works around a fault: DegradedLocks, DegradedWatcher
	AttrFace         = "cni.face"           // the face that was called: gocni
	AttrNetworks     = "cni.networks.count" // spans only: networks an operation covers
)

// Outcomes of an operation or a plugin run, as [AttrOutcome] takes them.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"        // any other failure
	OutcomePluginError = "plugin_error" // the plugin answered with a CNI error
	OutcomeTimeout     = "timeout"      // the deadline passed
	OutcomeCanceled    = "canceled"     // the context was canceled
	OutcomeNotFound    = "not_found"    // the plugin binary is missing
	OutcomeOutputLimit = "output_limit" // the plugin printed past its cap and was killed
)

// GC results, as [AttrGCResult] takes them.
const (
	GCDeleted = "deleted"
	GCKept    = "kept"
	GCFailed  = "failed"
)

// Instrument names and units.
const (
	MetricOperationDuration = "cni.operation.duration"   // s, histogram: operation, outcome
	MetricPluginDuration    = "cni.plugin.duration"      // s, histogram: verb, network, plugin.type, reason, outcome
	MetricDELFailures       = "cni.del.failures"         // {failure}, counter: network, reason, del.class
	MetricPending           = "cni.teardown.pending"     // {sandbox}, gauge
	MetricPendingOldest     = "cni.teardown.pending.age" // s, gauge: the oldest pending teardown's age
	MetricRollbacks         = "cni.rollback.active"      // {rollback}, up-down counter
	MetricGCRuns            = "cni.gc.runs"              // {run}, counter: outcome
	MetricGCAttachments     = "cni.gc.attachments"       // {attachment}, counter: gc.result
	MetricReloads           = "cni.config.reloads"       // {reload}, counter
	MetricSkipped           = "cni.config.skipped"       // {file}, gauge: config.reason
	MetricDegraded          = "cni.degraded"             // 1 or 0, gauge: degraded.part (locks, watcher)
)

// Values of AttrDegradedPart: the parts that work around a node's fault.
const (
	DegradedLocks   = "locks"   // the node-wide lock files cannot be used
	DegradedWatcher = "watcher" // the conf dirs are polled: no fsnotify watcher
)

// Span names. A plugin run's span is named SpanPlugin and its verb,
// "cni.plugin ADD".
const (
	SpanPlugin   = "cni.plugin"
	SpanRollback = "cni.rollback"
	SpanHeal     = "cni.heal"
)
