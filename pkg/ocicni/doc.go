// Package ocicni attaches pod sandboxes to CNI networks and detaches them
// again without leaking addresses, interfaces or cache entries.
//
// It is source-compatible with github.com/cri-o/ocicni/pkg/ocicni: the
// types, constants, the [CNIPlugin] interface and the [InitCNI] family are
// the same, so a runtime switches by changing its import path. New
// capability comes through [New] and its options, and through new types
// such as [TeardownError] and [Outcome].
//
// # Overview
//
//	m, err := ocicni.New(ocicni.WithConfDir("/etc/cni/net.d"), ocicni.WithBinDirs("/opt/cni/bin"))
//	if err != nil { ... }
//	defer m.Shutdown()
//	pod := ocicni.PodNetwork{Namespace: "default", Name: "web", ID: id, NetNS: "/var/run/netns/web"}
//	results, err := m.SetUpPodWithContext(ctx, pod) // ADD on the default network, eth0
//	...
//	err = m.TearDownPodWithContext(ctx, pod) // DEL of everything the pod holds, best effort
//	...
//	err = m.GC(ctx, validPods) // DEL of what no valid pod holds, then the GC verb
//
// A failed setup rolls back what it attached. A teardown runs every DEL
// even after one fails and reports each failure with its network; a DEL
// that failed is retried in the background until it succeeds. GC removes
// what no pod owns. The README (https://github.com/seed-671fdd43/ocicni#readme)
// is the guide: how to try it and how to switch a runtime over (CRI-O
// through this package; containerd, BuildKit, Nomad and nerdctl through
// package gocni).
// The sections after the map are the reference.
//
// # Map
//
// [Manager] only dispatches: each exported method, all in manager.go,
// hands its call to one part. The parts share the engine (engine.go):
// the options as data, the store, the plugin runner, the locks and the
// loaded networks.
//
//	manager.go      Manager, New and the InitCNI family: the doors
//	engine.go       engine: what the parts share; the network set
//	attach.go       attacher: SetUpPod, rollback, repeated setups
//	teardown.go     detacher: TearDownPod, the DELs, the retries the healer runs
//	forget.go       detacher: ForgetPodCache
//	heal.go         healer and HealPolicy: when a failed DEL is retried (its state, backoff, give-up)
//	unsettled.go    the DELs whose outcome could not be committed (a sick cache dir), for the healer
//	gc.go           collector: GC, the GC verbs
//	gcplan.go       collector: what is stale (the one place that decides), GC's scope
//	gcdel.go        collector: the stale DELs, on workers
//	gcpace.go       how GC yields to setups
//	status.go       checker: GetPodNetworkStatus (CHECK, or the ADD's result a moment after it), Status (STATUS)
//	plan.go         a plan: its config, cache rule and runtime config
//	inventory.go    store: what a pod asks for and a sandbox holds (cache entries, order record)
//	inventories.go  Inventory, Inventories: the same for operators
//	record.go       store: the one door to the order records, and their next state
//	locks.go        a pod's locks (gate, node gate, sandbox lock file), their faults and takeover
//	admission.go    Admission: pod operations' turns to run plugins
//	setups.go       the setups in flight, which GC and the healer watch
//	exec.go         the plugin executor, the libcni runner, a plan run's context (planRun)
//	validate.go     checks of IDs, names, args; netns.go: netns paths
//	errors.go       typed errors; outcome.go: Outcome, the class of a DEL
//	options.go      Option and the With... options; telemetry.go: spans, metrics, log fields, Health
//	types*.go       the surface shared with cri-o/ocicni, results, per-OS defaults
//
// The lock contract (its reasons are in "Locking"): locks are taken in
// the order the GC gate, the node gate (shared by every engine on the
// cache dir), the sandbox's mutex, its lock file; an admission slot comes
// last and waits for nothing. A pod operation holds the gates shared;
// only GC's verbs hold them exclusively. The healer's, the setup
// tracker's, the admission queues', the lock fault's, the unsettled
// DELs' and the fresh ADDs' locks are leaves.
//
// # Lifecycle
//
// [New] reads the conf dir (".conflist", ".conf" and ".json" files, in file
// name order; a ".conf" or ".json" file becomes a single-plugin list) and,
// unless [WithoutWatcher] is given, watches it and the bin dirs with
// fsnotify. Created, written, renamed-in and removed files take effect
// without a restart, and so do changes of the files that symlinked configs
// lead to (a Kubernetes-style ..data swap included) and plugin binaries
// installed, replaced or made executable. The first event of a burst is
// reloaded at once, and the events that follow in one more reload once
// they pause for a few milliseconds, so that a change made of several
// events (a write after a truncation, a rename after a write) is usable
// within milliseconds too; events after that reload are gathered into
// one more, a debounce window ([WithReloadDebounce], 100ms by default)
// after the latest of them. A burst of writes thus costs two or three
// reloads. A file staged in the conf dir under a name that is not read
// (such as 10-a.conflist.tmp) counts only when it is renamed into place. A
// conf dir that does not exist yet, or is deleted and recreated, is picked
// up when it appears. A file that cannot be used (bad JSON, no name, no
// plugins, a version its plugins do not support, a plugin binary missing
// from every bin dir) is skipped and logged, and [Manager.Skipped] says
// why; a request for its network fails with a [NetworkNotFoundError] that
// carries the reason. A file that the first two reloads of a burst cannot
// read or parse may be half-written: it is logged at Debug, and at Warn
// only if the reload a window later still cannot use it. When two files
// declare one network, the first in name order wins.
//
// A ".conflist" network that does not set loadOnlyInlinedPlugins also runs
// the ".conf" plugin configs of its sub-folder <confdir>/<network name>/,
// appended in file name order, as libcni 1.3 does. The sub-folder is
// watched, and the list's bytes, which libcni caches at ADD, are rewritten
// to hold every plugin, so that a DEL from the cache runs them all.
//
// The conf dir is not trusted. Only regular files, or symlinks to them, of
// at most [MaxConfigFileSize] bytes are read, and a FIFO never blocks a
// read: anything else is skipped with a [ConfigError] that wraps
// [ErrInvalidConfig] and [ErrNotRegularFile] or [ErrFileTooLarge] (a
// non-regular file in a network's sub-folder is skipped alone; its network
// still loads). A network name must pass the checks of a requested
// network's name and libcni's own (letters, digits, "_", "." and "-",
// starting with a letter or digit, no "..", at most 100 bytes), and a
// plugin type must be a plain file name (no slash, backslash or control
// character, not "." or ".."), or the file is skipped as invalid.
//
// The default network is the one named with [WithDefaultNetwork];
// otherwise it is the first valid file's network, and it follows the
// directory. [Manager.Shutdown] stops the watcher and the healing loop
// and waits for them, for the reloads that are running, for background
// rollbacks and for a heal retry in flight; it kills the plugins of the
// VERSION calls that are running rather than wait for them. It may be
// called twice. As in cri-o/ocicni, every method keeps working
// afterwards, as for a manager created [WithoutWatcher].
//
// A reload builds a new network set off to the side and swaps it in
// atomically, so an operation never sees half a reload; sets are swapped
// in the order in which their reloads read the conf dir, so a slower
// reload never overwrites a newer set. It re-parses only files whose size
// or times changed, and runs a plugin's VERSION only when that binary's
// path, size, times or inode changed: an answer and a failure (an error,
// or no answer within 10s) are both remembered until then. The VERSION
// calls of distinct binaries run concurrently, a few at a time, each
// bounded by its own timeout and cancelled by no caller; only Shutdown
// cuts them short, and a call it cut short is asked again, not
// remembered as a failure. A reload waits for them for about a second; a
// network whose plugins have not answered by then is reported as skipped
// with [ErrVersionPending] (or keeps the config it had) until the reload
// after the answer, so one hung plugin does not hold the others up.
//
// # Locking
//
// On one node, at most one CNI operation per sandbox runs at a time,
// whichever engine or process on the cache dir runs it; different
// sandboxes run concurrently. The lock order is the map's: the gate,
// the node gate, the sandbox's mutex, its lock file. The lock file,
// <cache dir>/ocicni/locks/<ID>, is an flock(2) that the kernel releases
// when its holder dies, and goes with the sandbox's record. The plugins
// of an operation inherit it, so that a plugin left running by a killed
// process keeps the sandbox until it exits. The node gate (.node beside
// it) is the half of the gate that all engines share.
//   - A pod operation takes both gates shared, then its sandbox's locks. A
//     background rollback (see [SetupError]) drops the gates, and a heal retry
//     takes only the sandbox's locks: no node-wide lock while they run.
//   - [Manager.GC] plans without any lock. Each DEL worker takes locks as
//     a pod operation does, but leaves alone a sandbox whose lock file
//     another engine holds; one that gives way to setups waits for its
//     turn before taking them. GC holds both gates exclusively, and no
//     sandbox lock, only while it sends the GC verbs (at most 10 s).
//   - Nothing waits for a gate exclusively while holding it shared or
//     holding a sandbox's lock, so GC and pod operations cannot deadlock.
//   - A setup or teardown waits for its admission (see [Admission]) only
//     once it holds its sandbox's locks, and its slot waits for nothing.
//   - The manager's other locks (setups in flight, the heal schedule, the
//     admission queues) are leaves.
//
// Lock files that cannot be used (a sick file system, a symlinked state
// dir) stop no teardown: it runs under this process's locks, and setups
// refuse ([ErrLocksUnavailable], [Health]). A lock whose holder's process
// has ended is taken over once it outlives every plugin timeout.
//
// A pod operation therefore waits at most for GC's DELs of its own sandbox,
// or for the GC verbs, never for a whole GC or another sandbox's plugins.
// GC takes the gates when no operation is in flight; failing that within
// a second, it holds new operations back for at most 200 ms at a time
// while those in flight finish. If GC's context ends first, it skips the
// verbs ([ErrGCVerbsSkipped]) and the next GC sends them. The network
// set is an atomic pointer, so neither [Manager.Status] nor a new pod
// ever waits for a reload or for another pod's plugins. Every lock wait
// respects the context.
//
// A pod operation that names a network that is not loaded asks for a
// reload and waits for it (and, while the network only waits for a VERSION
// answer, for that answer) until its context ends. The reload itself runs
// under no caller's context, so a caller that gives up does not make it
// fail for everyone. The loader's lock (a context-aware semaphore) is held
// only while the conf dir is read and while a new set is swapped in, never
// while a plugin runs.
//
// # Setup
//
// A setup validates the request, sets lo up, records the attachments and
// runs ADD network by network, rolling back on failure: see [SetupError].
//
// # Admission
//
// Setups and teardowns run their plugins in arrival order, a bounded
// number at once: see [Admission].
//
// # Repeated setups
//
// A setup never runs ADD again for an attachment its sandbox holds live:
// see [AttachedError].
//
// # Plugin processes
//
// How plugins run, are killed and are bounded: see [PluginRun].
//
// # Teardown semantics
//
// Every attachment gets its DEL, in the reverse of the recorded ADD order,
// even after earlier ones failed; what a teardown deletes, with which
// config, and how it reports each attachment is on [TeardownError].
//
// # Attachment order records
//
// Before the first ADD, setup writes the pod's attachments (network,
// ifname, netns, and the digest of the exact config each is added with,
// saved next to the record, one copy per distinct config) to a record
// outside libcni's results directory (see package cache). Both are
// written durably (fsync of the file, then of the directory) before any
// plugin receives an ADD config. The first plugin's process starts
// meanwhile, since starting it takes longer, and waits for its config on
// stdin; when the record cannot be written, it is killed without having
// read it and the setup fails with nothing attached (an executor set with
// [WithExec] is called only once the record is written). Whichever step
// failed, at whatever free space, the setup takes back the links and
// copies it made and the record it replaced, keeping what other records
// use; only the layout's directories stay. The error names the step and
// unwraps to the cause (syscall.ENOSPC). Teardown and GC need no free
// space. The shared copies of the configs saved last are kept when no
// record links them, for the next pod of the same config to link.
//
// An attachment leaves the record only once its DEL succeeded or its plugin
// said it is gone: after a teardown, a rollback or a GC that could not
// delete it, it is still recorded, whether or not its cache entry survived,
// with its retry state. The record goes when it is empty; GC removes saved
// configs that no record uses once they are 10 minutes old.
//
// Every path (setup, teardown, rollback, healing, status, forget, GC and
// [Manager.PendingTeardowns]) reads a sandbox's cache entries, record and
// saved configs through one merge, its inventory, so they agree on its
// attachments and on which entries libcni may read (see [ConfigError]).
// One writer writes and lists the records.
//
// # Attachment types
//
// One attachment is seen through several types: see [NetAttachment].
//
// # Healing
//
// A DEL that failed is retried in the background until it succeeds: see
// [HealPolicy].
//
// # Untrusted files
//
// Config files, cache entries and order records are not trusted: see
// [ConfigError].
//
// # Bad input
//
// Requests are validated before anything runs: see
// [InvalidArgumentError].
//
// # Results
//
// Results of every spec version are accepted and returned as the plugins
// produced them: see [NetResult].
//
// # Status and GC
//
// What a pod's status and the node's status run is on [NetworkStatus];
// what GC deletes, what it keeps for valid pods and for setups in flight,
// and how it runs beside pod operations, on [Manager.GCOutcomes].
//
// # Cache layout
//
// What the manager keeps in the cache dir, beside libcni's entries, and
// how a crash leaves it, is on [WithCacheDir].
//
// # Observability
//
// The manager makes OpenTelemetry spans, one per public operation and one
// per plugin run under it (see [WithTracerProvider]), and records metrics
// whose cardinality the networks and plugin types bound (see
// [WithMeterProvider]). It uses only the OpenTelemetry API; the runtime
// wires its SDK and exporters. With neither configured it costs what the
// API's no-op does.
//
// [WithPluginHook] registers a [PluginHook] called after every plugin run
// with the verb, network, plugin, container, ifname, duration, error and
// output, for what the instruments above do not cover. [WithPluginEnv]
// adds environment variables to every plugin run, such as GOMAXPROCS=2
// on hosts with many cores, where Go plugins otherwise spend most of
// their start-up in the Go runtime.
package ocicni
