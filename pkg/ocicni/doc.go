// Package ocicni attaches pod sandboxes to CNI networks and detaches them
// again without leaking addresses, interfaces or cache entries.
//
// It is source-compatible with github.com/cri-o/ocicni/pkg/ocicni: the
// types, constants, the [CNIPlugin] interface and the [InitCNI] family are
// the same, so a runtime switches by changing its import path. New
// capability comes through [New] and its options, and through new types
// such as [TeardownError] and [Outcome].
//
// # Lifecycle
//
// [New] reads the conf dir (".conflist", ".conf" and ".json" files, in file
// name order; a ".conf" or ".json" file becomes a single-plugin list) and,
// unless [WithoutWatcher] is given, watches it and the bin dirs with
// fsnotify. Created, written, renamed-in and removed files take effect
// without a restart; a burst of events becomes one reload; a conf dir that
// does not exist yet, or is deleted and recreated, is picked up when it
// appears. A file that cannot be used (bad JSON, no name, no plugins, a
// version its plugins do not support, a plugin binary missing from every
// bin dir) is skipped and logged, and [Manager.Skipped] says why; a request
// for its network fails with a [NetworkNotFoundError] that carries the
// reason. When two files declare one network, the first in name order wins.
//
// As in libcni, a ".conflist" that does not set loadOnlyInlinedPlugins gets
// the plugin configs of the ".conf" files in the sub-folder named after its
// network appended to its plugins, in file name order.
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
// directory. [Manager.Shutdown] stops the watcher, waits for it and for the
// plugin VERSION calls that are running, and may be called twice.
//
// A reload builds a new network set off to the side and swaps it in
// atomically, so an operation never sees half a reload; sets are swapped
// in the order in which their reloads read the conf dir, so a slower
// reload never overwrites a newer set. It re-parses only files whose size
// or times changed, and runs a plugin's VERSION only when that binary's
// path, size, times or inode changed: an answer and a failure (an error,
// or no answer within 10s) are both remembered until then. The VERSION
// calls of distinct binaries run concurrently, a few at a time, under the
// manager's context. A reload waits for them for about a second; a network
// whose plugins have not answered by then is reported as skipped with
// [ErrVersionPending] (or keeps the config it had), and is loaded by the
// reload that follows the answer, so one hung plugin does not hold up the
// other networks.
//
// # Locking
//
// Operations on one sandbox (keyed by its ID) are serialized; operations on
// different sandboxes run concurrently. The lock order is: the GC gate
// (held shared by pod operations and exclusively by [Manager.GC]), then the
// sandbox's lock. The network set is an atomic pointer, so neither
// [Manager.Status] nor a new pod ever waits for a reload or for another
// pod's plugins, and no lock that they need is held while a plugin runs.
// Every lock wait respects the context.
//
// A pod operation that names a network that is not loaded asks for a
// reload and waits for it (and, while the network only waits for a VERSION
// answer, for that answer) until its context ends. The reload itself runs
// under the manager's context, so a caller that gives up does not make it
// fail for everyone. The loader's lock (a context-aware semaphore) is held
// only while the conf dir is read and while a new set is swapped in, never
// while a plugin runs.
//
// # Setup
//
// [Manager.SetUpPodWithContext] validates the request before any plugin
// runs (see "Bad input"), sets lo up in the netns without a plugin, records
// the attachment order in the cache, and runs ADD for each network in
// order, with the CNI_ARGS and runtime-config capabilities ocicni passes
// (portMappings, bandwidth, ipRanges, aliases, cgroupPath,
// io.kubernetes.cri.pod-annotations, static IP and MAC). Interface names
// are the requested ones, or eth0, eth1, ... skipping names already taken.
//
// When network k fails ADD, the manager runs DEL for network k and then
// for networks k-1 ... 0, best effort, under its own timeout
// ([WithRollbackTimeout]) even when the caller's context has expired, and
// returns a [SetupError] holding the ADD error and any rollback failures.
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
//     config file changed or was removed, or with an empty conf dir. Without
//     a cache entry it uses the loaded config; with neither, the attachment
//     is reported as [NoConfig], a warning.
//   - A corrupt cache entry is deleted with the loaded config when there is
//     one, and reported as a failure when there is not.
//   - Each attachment's [Outcome] is classified: [Deleted], [AlreadyGone]
//     (code 3; counts as success), [RetryLater] (code 11, an expired
//     context, a plugin binary that is gone), or [Failed].
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
//
// [Manager.TearDownPodOutcomes] returns the outcomes as values whatever the
// policy.
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
// netlink. A CHECK failure is a [NetworkError] naming the network.
//
// [Manager.StatusWithContext] fails while there is no default network and
// runs STATUS on it at CNI 1.1.0 or later; a plugin's code, such as
// [ErrCodePluginNotAvailable] (50) or [ErrCodeLimitedConnectivity] (51), is
// reachable with errors.As. [Manager.NetworkStatuses] reports every loaded
// network.
//
// [Manager.GC] deletes every cached attachment that no valid pod owns, with
// its cached config, so attachments of removed networks are collected too;
// corrupt entries and attachments recorded at ADD but never cached are
// deleted with the loaded config inside the netns recorded at ADD. It then
// sends the GC verb, with the valid attachments (never a nil list, which
// libcni reads as "delete everything"), to networks at 1.1.0 or later that
// do not set disableGC. A valid pod keeps every attachment the cache holds
// for its ID, whatever the default network is now. GC holds the gate
// exclusively, so no ADD runs while plugins collect.
//
// # Bad input
//
// Empty or hostile container IDs, interface names and network names (path
// separators, "..", control characters), a relative or missing netns path
// on setup, an invalid static IP or MAC, duplicate requested interface
// names, and pod names, namespaces or UIDs containing ";" or "=" (which
// would inject CNI_ARGS keys) are rejected with an [InvalidArgumentError]
// before any file is touched or any plugin runs.
//
// # Cache layout
//
// The libcni result cache is read only through package
// github.com/seed-671fdd43/ocicni/pkg/cache, which also keeps the
// attachment order record outside libcni's results directory.
package ocicni
