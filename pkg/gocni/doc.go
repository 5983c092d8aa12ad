// Package cni, in directory pkg/gocni, is a go-cni face over the ocicni
// engine: it is source-compatible with github.com/containerd/go-cni
// (v1.1.14 and v1.1.15), whose package is named cni too, so a runtime such
// as containerd switches by rewriting that import path to
// github.com/seed-671fdd43/ocicni/pkg/gocni, unaliased imports included,
// and gets the engine's setup and teardown (package ocicni) without other
// changes.
//
// # One engine
//
// [New] starts an [ocicni.Manager] and every plugin run goes through it;
// the face translates calls and types and adds no policy of its own:
//
//   - [Face.Setup] and [Face.SetupSerially] both attach a sandbox's
//     networks one after the other (the CNI spec allows no parallel
//     operations on one container), bring lo up in-process (no loopback
//     plugin runs), and roll back a failed setup: DEL for the failed
//     network and every one before it, in reverse order.
//   - [Face.Remove] runs DEL for every attachment the engine knows of
//     (libcni's cache and the engine's order record), in reverse ADD
//     order, past failures, with the config cached at ADD; it does not
//     depend on what is loaded. Its error matches *[ocicni.TeardownError].
//   - [Face.GC] is the engine's GC, for a runtime to adopt. A runtime
//     whose sandboxes never survive its restart, as BuildKit's build-step
//     namespaces, can call it once at start with no valid sandbox: it then
//     collects what a SIGKILL left even when the namespace files are lost
//     (test/e2e/buildkit/gc.patch and its README). GC acts only on the
//     attachments of the loaded networks (the engine runs with
//     [ocicni.WithGCScopedToLoadedNetworks], unless an option given with
//     [WithEngineOptions] sets another scope), as libcni's GCNetworkList
//     does, so on a host where other runtimes share the default cache
//     dir their sandboxes on other networks keep everything; the
//     attachments of networks no longer loaded wait for [Face.Remove].
//   - Sandbox IDs, interface names and paths are validated by the engine
//     before any plugin runs.
//   - Plugins get in CNI_ARGS the pairs of [WithLabels] and [WithArgs],
//     IP and MAC included, and nothing else, as with go-cni: no pair of
//     the engine's and none of the process's own CNI_ARGS variable (the
//     engine runs with [ocicni.WithArgsAsGiven]).
//   - A face created on a thread locked in another network namespace
//     than the process's, as BuildKit creates it in RootlessKit's
//     detached one, starts every plugin in that namespace, background
//     DEL retries and rollbacks included (see [ocicni.New]); Setup and
//     SetupSerially called from such a thread run their ADDs there, as
//     go-cni's do.
//
// # Loading
//
// Loading stays the caller's, as in go-cni: options given to [New] or to
// [CNI.Load] ([WithDefaultConf], [WithAllConf], [WithConfListBytes], ...)
// parse configs into an ordered list of networks, network i getting the
// interface prefix+i. The face hands that list (loopback excepted) to the
// engine in memory, every plugin inline, and has the engine, which reads
// no conf dir and runs no watcher, load it before Load returns: the
// engine checks each network (names, plugin binaries, VERSION) as it
// checks a conf dir's files, and its messages name a network by its
// index in [ConfigResult].Networks ("networks[1]"). Thus
// [WithPluginMaxConfNum], go-cni's file order, and configs given as bytes
// mean what go-cni says, and the engine sees exactly the loaded networks.
// The face writes no files: nothing is left on disk when a runtime never
// calls [Face.Shutdown] (go-cni has none).
//
// The face does not depend on the caller's watcher alone: a Setup, Check
// or Status that finds fewer networks than [WithMinNetworkCount] asks for
// runs the last load's options again first, so a conf file moved away and
// back is picked up without another Load.
//
// # Differences from go-cni
//
//   - Setup is serial, and rolls back.
//   - Remove is best effort across networks and works from the cache
//     when no network is loaded; go-cni's returns at the first failure and
//     refuses to run before a successful Load.
//   - [Face.GC] has no go-cni counterpart; it collects the loaded networks
//     only, as libcni's GCNetworkList, unlike the engine's own GC, which
//     by default also collects the attachments that the engine's order
//     records name of networks no longer loaded.
//   - [WithLoNetwork] runs no plugin; results still list lo, with
//     127.0.0.1/8 and ::1/128.
//   - [WithCapabilityIPRanges] passes its ranges as one range set, as the
//     CNI conventions expect ([[...]]).
//   - [Network] has no Attach, Check or Remove methods.
//   - The concrete type behind [CNI] is [*Face]: a type assertion to
//     go-cni's unexported type, or to sync.Locker, fails.
//   - Two loaded networks with one name share the first one's config in
//     the engine; two with one interface name fail at setup.
//   - A load made of the loopback network alone cannot set a pod up.
//   - [WithPluginDir] takes effect at New only.
//   - A CNI_ARGS pair whose key is empty or holds "=" or ";", whose
//     value holds ";", or that holds a control character, is refused
//     before any plugin runs: go-cni passes it on, and the plugin reads
//     other pairs than given, or a variable that spans lines.
//   - Each [New] starts an engine, with a goroutine for healing; a face
//     that becomes unreachable without [Face.Shutdown] shuts its engine
//     down when the garbage collector finds it, so code that calls New
//     repeatedly does not pile engines up. DEL retries of that engine not
//     yet due wait for another engine on the cache dir, which adopts
//     them.
//
// # Locking
//
// The face takes its load lock, then its config lock; neither is held
// while a pod's plugins run. Pod operations of one sandbox are serialized
// by the engine, across every face and engine on the cache dir: many
// faces in one process (one per allocation, as Nomad makes them) and
// short-lived processes (nerdctl's OCI hooks) run one operation per
// sandbox at a time. An engine starts no background retry in its first
// [ocicni.HealPolicy].StartDelay, so a hook process that exits sooner
// cuts none off; an engine that lives longer on the cache dir (the
// runtime's own) adopts the retries such a process leaves. See package
// ocicni, "Locking", and [ocicni.HealPolicy].
package cni
