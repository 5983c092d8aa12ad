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
//     background rollback (see "Setup") drops the gates, and a heal retry
//     takes only the sandbox's locks: no node-wide lock while they run.
//   - [Manager.GC] plans without any lock. Each DEL worker takes locks as
//     a pod operation does, but leaves alone a sandbox whose lock file
//     another engine holds; one that gives way to setups waits for its
//     turn before taking them. GC holds both gates exclusively, and no
//     sandbox lock, only while it sends the GC verbs (at most 10 s).
//   - Nothing waits for a gate exclusively while holding it shared or
//     holding a sandbox's lock, so GC and pod operations cannot deadlock.
//   - A setup or teardown waits for its admission (see "Admission") only
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
// [Manager.SetUpPodWithContext] validates the request before any plugin
// runs (see "Bad input"), sets lo up in the netns without a plugin
// (through [NetNSOps], which [WithNetNSOps] replaces in tests), records
// the attachment order in the cache, and runs ADD for each network in
// order, with the CNI_ARGS and runtime-config capabilities ocicni passes
// (portMappings, bandwidth, ipRanges, aliases, cgroupPath,
// io.kubernetes.cri.pod-annotations, static IP and MAC). Interface names
// are the requested ones, or eth0, eth1, ... skipping names already taken.
//
// When network k fails ADD, the manager runs DEL for network k and then
// for those of networks k-1 ... 0 that this call added (see "Repeated
// setups"), best effort, under its own timeout
// ([WithRollbackTimeout]), and returns a [SetupError] holding the ADD
// error and any rollback failures. When the caller's context ends before
// the rollback does (also when the ADD failed at once and the rollback is
// slow), the call returns at the deadline instead: the SetupError matches
// the context's error and [ErrRollbackPending], and the rollback finishes
// in the background, holding the sandbox's lock (and no node-wide lock),
// so that the next operation on the sandbox waits for it.
// [Manager.ForgetPodCache] drops a sandbox's cache entries on purpose,
// recording their attachments first so that GC still deletes them.
//
// # Admission
//
// Setups run their plugins in arrival order, at most [Admission].Setup at
// once (two per CPU by default); the others wait with their sandbox's
// lock (see "Locking"). Plugin start-up is CPU-bound, so with every ADD of a burst at
// once each pod waits for all of them; admitted in turn, most pods are ready
// sooner and the last no later. Teardowns have their own queue, eight per
// CPU by default: a DEL mostly waits. A call whose context ends in the queue
// returns an error matching [ErrNotAdmitted] and the context's error, having
// run and changed nothing. An operation counts against its bound for at most
// [Admission].Overtime (a second), so a hung plugin holds the queue up no
// longer. Status, CHECK, a repeated setup that finds every attachment live,
// GC and healing's retries never queue. A rollback runs under its setup's
// admission; left in the background by its caller's deadline, it gives it
// up. [WithAdmission] sets the bounds; [WithoutAdmission] admits every
// operation at once, as libcni's callers do.
//
// # Repeated setups
//
// A setup never runs ADD again for an attachment its sandbox holds live
// (a runtime retrying RunPodSandbox with the same ID, callers racing on
// one ID), and its rollback never deletes one: the spec forbids a second
// ADD without a DEL between, plugins refuse it ("eth0 already exists"),
// and that rollback would delete what the first setup returned. An
// attachment is live when its cache entry is readable and accepted and
// its record line, if any, records no failed DEL. Under the sandbox's
// lock, before anything runs, each requested attachment that is live and
// identical to the request (network, ifname, config bytes, netns, CNI_ARGS
// and runtime config as at its ADD) gets its cached result and no plugin;
// one that differs, or whose result cannot be read, refuses the whole
// setup with an *[AttachedError] ([ErrAttachmentLive]); the others are
// added, and only they are rolled back. The repeat runs no CHECK.
//
// # Plugin processes
//
// Unless [WithExec] replaces the executor, plugins run as libcni runs them
// (same stdin, environment and stderr, and a plugin's JSON error on stdout
// becomes a *types.Error), except that on Unix each plugin leads a process
// group of its own. When the context ends before the plugin exits, the
// plugin and every process it started in its group get SIGKILL, and the
// error matches the context's error with errors.Is while errors.As still
// reaches the plugin's *types.Error. A process that left the group
// survives. A plugin that exits on its own has nothing killed, so a daemon
// it started keeps running. Whatever process outlives the plugin, the call
// returns at most two seconds after the plugin ended, even if that process
// holds the plugin's stdout or stderr open. Off Unix the executor is
// invoke.RawExec, which kills the plugin alone. A context that is already
// done starts no plugin, whatever the executor. The default executor keeps
// at most [MaxPluginStdout] and [MaxPluginStderr] of a plugin's output, in
// memory that cannot grow past them: a plugin that prints more is killed
// with its group ([PluginOutputLimitError]). Errors quote at most
// [PluginOutputQuoteLimit] bytes of it; a [PluginHook] gets all of it. On
// Unix, background DELs (GC's, healing's) run at nice 19, and on Linux at
// SCHED_IDLE in every thread, leaving the CPU to the pods being set up;
// the GC verbs, which pod operations wait for, do not. While pods are set
// up, GC paces its DELs instead, at the normal priority (see "Status and
// GC"): at the lowest, beside setups that keep the CPUs busy, a DEL waits
// for an idle moment that seldom comes, holding the kernel's network locks
// the setups then wait for.
//
// A network's plugin runs for one verb may have a bound of their own
// ([Timeouts]): the top-level key [TimeoutsKey] of its config file, for
// example "ocicni.timeouts": {"add": "30s", "del": "10s", "check": "5s"},
// or [WithNetworkTimeouts] for every network that does not set the verb
// itself. The bound covers all the plugins of the list for one attachment,
// and the shorter of it and the caller's deadline applies. Runs that the
// bound ends fail with a [*TimeoutError] (which matches
// context.DeadlineExceeded): a timed-out ADD is rolled back like any
// failed one, a timed-out DEL is [RetryLater] and healing retries it, a
// timed-out CHECK fails the status. The bound travels with the config: a
// teardown from the config cached at ADD uses that config's key. A value
// that is not a Go duration above zero, or an unknown verb, skips the file
// with a [ConfigError].
//
// # Teardown semantics
//
//   - Every attachment gets its DEL, even after earlier ones failed.
//   - With PodNetwork.Networks empty, the attachments are the container's
//     libcni cache entries, deduplicated by (network, ifname). Two networks
//     that claim the same ifname are both deleted, with a warning. Requested
//     networks are deleted exactly as requested, never widened.
//   - DELs run in the reverse of the recorded ADD order. Attachments that
//     are missing from the record run first, by network then interface name,
//     descending.
//   - DEL uses the cached config and runtime args, so it works after the
//     config file changed or was removed, or with an empty conf dir.
//     Without a usable cache entry it uses the config saved with the order
//     record, else the loaded config. With none, an attachment that a
//     cache entry or the order record names is reported as [Orphaned], a
//     failure, and stays recorded until a config returns; any other is
//     [NoConfig], a warning.
//   - The order record (see "Attachment order records") is also the memory
//     of attachments that never reached libcni's cache (an ADD that failed
//     after an earlier plugin of its list attached, or a crash during ADD),
//     so they are deleted too, inside the netns recorded at ADD.
//   - A corrupt cache entry, or one whose result libcni cannot decode, is
//     deleted with the best config there is (the cached one when readable,
//     else the loaded one), but libcni never reads the file: its DEL would
//     block on a FIFO, read a huge file, drop the entry before running the
//     plugins, or panic. The file goes only after DEL succeeded. Without
//     any config it is reported as a failure.
//   - Each attachment's [Outcome] is classified: [Deleted], [AlreadyGone]
//     (code 3; counts as success), [RetryLater] (code 11, an expired
//     context, a plugin binary that is gone), [Failed] or [Orphaned].
//   - libcni stops a list's DEL at the first plugin that answers code 3,
//     so plugins before it in the list (bridge, host-local) get no DEL and
//     what they hold would leak. The spec allows it, but DEL is idempotent,
//     so by default the manager then runs DEL for every plugin of the list
//     itself, last to first, as single-plugin lists without prevResult:
//     the plugins before the code-3 plugin and those after it (again) all
//     get their DEL, and code 3 from any of them counts as success. The
//     attachment is [Deleted] once each DEL succeeded or answered code 3;
//     otherwise the first other failure is its outcome and its cache entry
//     stays. The same applies to rollbacks and GC. With
//     [WithDELStopAtUnknownContainer] the manager keeps libcni's behaviour:
//     the attachment is [AlreadyGone], a warning names the network, and GC
//     (the plugins' own, at CNI 1.1) must collect what those plugins kept.
//   - Under the [Strict] policy (the default) failures are returned as a
//     [TeardownError], which names each failed network and ifname and
//     unwraps to one [NetworkError] per failure, so errors.As reaches the
//     plugin's *types.Error. Under [Tolerant] they are logged and nil is
//     returned. Either way the failed attachments' cache entries are kept,
//     so a retry or GC still has their config. A network can override the
//     policy with the top-level key [TeardownPolicyKey] in its config file:
//     "ocicni.teardownPolicy": "tolerant".
//   - Teardown is idempotent, and a netns that was already deleted does not
//     stop the DELs that release IPAM reservations.
//   - A failed DEL is retried in the background (see "Healing").
//
// [Manager.TearDownPodOutcomes] returns the outcomes as values whatever the
// policy.
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
// attachments and on which entries libcni may read ("Untrusted files").
// One writer writes and lists the records.
//
// # Attachment types
//
// One attachment is seen through these types:
//   - [NetAttachment]: a network and an interface name, as a request
//     names them and as every other type names the attachment.
//   - [cache.Entry] and [cache.EntryError]: libcni's cache file of an
//     attachment, readable or corrupt; [cache.Attachment]: its line in
//     the order record, with its saved config and retry state.
//   - Internally, the inventory merges these into one view per
//     attachment, and a verb turns that view into a plan: the config list
//     and runtime config a plugin runs with, and whether libcni may read
//     the cache entry.
//   - [Outcome]: what one DEL did; [PendingTeardown]: a failed DEL that is
//     retried; [NetResult]: what ADD or status returns.
//
// # Healing
//
// A DEL that failed in a teardown, a rollback or GC is retried in the
// background, under the sandbox's lock only, until it succeeds or its
// plugin answers code 3, with capped exponential backoff and jitter, at
// most [HealPolicy].Concurrency sandboxes at a time (SetupConcurrency
// while the node sets pods up, since a retry's interface deletions slow
// the setups beside it), until the horizon (see [HealPolicy] and
// [WithHealing]). The retry state lives in the order record, so a later
// manager on the same cache dir resumes it, and
// [Manager.PendingTeardowns] lists it. A running manager also adopts the
// retries that other engines and processes record (a mark beside the lock
// files tells it when to read the records again), so a DEL that failed
// in a one-call process (an OCI hook) is retried by a longer-lived one.
// A retry reads the record again under the sandbox's locks, so managers
// that resume the same retries run each due DEL once; none runs in a
// manager's first [HealPolicy].StartDelay, so a one-call process cuts
// none off. A setup of the same sandbox ID that runs ADD cancels it.
// Every retry reaches the [PluginHook] with Reason "heal".
//
// # Untrusted files
//
// Config files, cache entries and order records are written by other
// components and survive crashes and hand edits, so none is trusted:
//   - Only regular files are read (a symlink in the conf dir must lead to
//     one; the cache holds no symlinks), never with a blocking open, and
//     never more than [MaxConfigFileSize] or [cache.MaxFileSize] bytes.
//   - Every network name, container ID and ifname read from a cache entry
//     or a record passes the same validation as a request's before it
//     becomes a path, an environment variable or a plugin run, and must
//     agree with the entry's own file name and cached config; an entry that
//     does not is corrupt and is acted on only by its file name.
//   - A netns path read from the cache is used only when it is absolute,
//     clean, not per-process (see "Bad input") and not the host's network
//     namespace; otherwise DEL runs without one (plugins still release
//     IPAM).
//   - libcni reads a cache entry (as prevResult, and to remove it) only
//     when the inventory accepted it and libcni can decode its result;
//     every other DEL runs with libcni pointed at an empty cache dir, and
//     the file is removed once DEL succeeded.
//   - Every call from the manager's goroutines into libcni is behind a
//     recover: a panic (libcni's result converters have panicked on
//     nulls in cached results) becomes a [*PanicError] naming the file,
//     matching [ErrLibraryPanic], and that entry is handled as corrupt:
//     DEL again without its result, and the file kept until DEL succeeds.
//
// # Bad input
//
// Requests are validated before anything runs: container IDs, network
// names and ifnames as libcni's ADD validates them, plus path checks and
// the lengths [cache.MaxContainerIDLen] (128), [cache.MaxNetworkNameLen]
// (100) and [cache.MaxIfNameLen] (15), which keep libcni's cache file name
// within 255 bytes; pod name and namespace up to [MaxPodNameLen], UID up
// to [MaxPodUIDLen], none with ';', '=' or control characters (they go
// into CNI_ARGS); netns paths absolute, clean, existing for setup, and
// never the caller's own or init's network namespace. A netns path that
// leads, by name or through symbolic links, to /proc/self or
// /proc/thread-self (/proc/self/ns/net, /dev/fd/N) is refused too: each
// process that opens it sees its own namespace, so a plugin would find the
// host's there whatever the manager's threads see. /proc/<pid>/ns/net is
// fine. Invalid static IPs or MACs and duplicate requested interface
// names are refused too. A context that is already done starts nothing.
// Every rejection is an [InvalidArgumentError] naming the field, returned
// before any file is touched or any plugin runs.
//
// # Results
//
// Results of every spec version, 0.1.0 to 1.1.0, are accepted and returned
// as the plugins produced them: empty results of configuration-only
// plugins, 0.2.0 results without interfaces, IPs without an interface
// index. Nothing dereferences an absent interface or IP. [SandboxIPs] picks
// a network's sandbox interface and its IPs from any of them. A cached
// result that cannot be converted to the config's version is returned as
// stored, and the conversion error is logged.
//
// # Status and GC
//
// [Manager.GetPodNetworkStatusWithContext] returns the cached result, after
// CHECK for networks at CNI 0.4.0 or later (unless disableCheck); without a
// cached result it reads the interface's addresses from the netns through
// netlink. A CHECK failure is a [NetworkError] naming the network. Right
// after this manager's ADD it answers from the ADD's result instead
// ([WithStatusAlwaysChecks]).
//
// [Manager.StatusWithContext] fails while there is no default network and
// runs STATUS on it at CNI 1.1.0 or later; a plugin's code, such as
// [ErrCodePluginNotAvailable] (50) or [ErrCodeLimitedConnectivity] (51), is
// reachable with errors.As. [Manager.NetworkStatuses] reports every loaded
// network.
//
// [Manager.GC] deletes the attachments that no valid pod owns, of those
// this library owns: every attachment its order records name, whatever
// the network (one whose file is gone with the config saved at ADD), and
// the other cache entries of the networks loaded. The other entries of a
// shared cache dir (the default, /var/lib/cni) are other runtimes': GC
// leaves and reports none of them. [WithGCAllNetworks] collects those
// too; [WithGCScopedToLoadedNetworks] limits GC, as libcni's
// GCNetworkList, to the networks loaded. Managers of this library that
// share a cache dir each collect the others' recorded attachments that
// their valid pods do not name. Corrupt entries and attachments recorded
// but never cached (a failed rollback, a crash during ADD) are deleted
// with the loaded config inside the netns recorded at ADD; a recorded
// attachment without any config is [Orphaned] and stays recorded. GC then
// sends the GC verb, with the valid attachments (never a nil list, which
// libcni reads as "delete everything"), to networks at 1.1.0 or later
// that do not set disableGC. A valid pod's attachments are the networks
// it names, every cache entry and recorded attachment of its ID, and,
// when it names none, the default network on eth0. [Manager.GCOutcomes]
// is GC that also returns the [Outcome] of every stale attachment it
// acted on or could not act on.
//
// GC does not stop pod operations while it runs (see "Locking"). It plans
// without a lock, from one listing of the cache and one reading of the
// order records. It then deletes stale sandboxes in parallel,
// [WithGCWorkers] at a time (the DELs of one sandbox run one after the
// other), each under that sandbox's lock, skipping what a concurrent
// teardown deleted meanwhile. While pods are being set up (a setup in
// flight, or one begun within the last 250 ms), GC gives way to them: one
// worker deletes at a time, at the normal CPU priority, and rests six
// times as long as its sandbox's DELs took before the next: GC then uses
// a seventh of one CPU, and still deletes a sandbox per seven times its
// DELs' time (0.47 a second on two CPUs that setups keep busy;
// BENCHMARKS.md, "GC"). On an idle node GC runs at full speed, at the
// lowest priority. Only the GC verb runs with the gate held exclusively, so no ADD
// runs while plugins collect. When the context has a deadline and a
// network gets the verb, the stale DELs leave a quarter of the time left
// (at most 10 s) to the verbs: at that point the DELs in flight are cut
// short and the others do not start, each a [RetryLater] outcome for the
// next GC, so the verbs are sent however many sandboxes are stale. GC
// sends the verbs within 10 s; a network it did not reach by then, or by
// the end of its context, gets an error matching [ErrGCVerbsSkipped], and
// the next GC sends it the verb.
//
// A sandbox whose setup was in flight when GC began, or began since, may
// be missing from the valid pods: GC deletes nothing of it (checked again
// under its lock, so a setup that begins later runs after GC's DELs of
// that sandbox, not during them), and passes its attachments to the GC
// verb as valid. As the exclusive gate waits for every setup in flight, a
// plugin's GC never sees a half-set-up pod, and never releases what a pod
// being set up holds. Likewise GC leaves alone, and passes to the verb
// as valid, a sandbox that another engine still running holds or worked
// on within 10 s before GC began or since (its lock file's stamp says who
// and when); the next GC collects it if it is stale.
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
