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
// package gocni). After the map come the lock contract ("Locking") and
// where each rule is: on the symbol it governs.
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
// # Where the rules are
//
// Each rule is on the symbol it governs:
//   - the conf dir, reloads and the default network: [WithConfDir];
//     shutting down: [Manager.Shutdown]
//   - setup and its rollback: [SetupError]; repeated setups: [AttachedError]
//   - turns to run plugins: [Admission]; plugin processes: [PluginRun]
//   - teardown: [TeardownError]; background retries: [HealPolicy]
//   - the order records: [SandboxInventory]; one attachment's types:
//     [NetAttachment]; the cache dir: [WithCacheDir]
//   - untrusted files: [ConfigError]; bad input: [InvalidArgumentError]
//   - results: [NetResult]; status: [NetworkStatus]; GC: [Manager.GCOutcomes]
//   - traces and metrics: [WithTracerProvider], [WithMeterProvider],
//     [WithPluginHook]
package ocicni
