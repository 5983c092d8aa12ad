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
//   - [Face.GC] is the engine's GC, for a runtime to adopt.
//   - Sandbox IDs, interface names and paths are validated by the engine
//     before any plugin runs.
//
// # Loading
//
// Loading stays the caller's, as in go-cni: options given to [New] or to
// [CNI.Load] ([WithDefaultConf], [WithAllConf], [WithConfListBytes], ...)
// parse configs into an ordered list of networks, network i getting the
// interface prefix+i. The face writes that list (loopback excepted) into a
// conf dir of its own (one file per network, each written atomically,
// every plugin inline) and has the engine, which runs without a watcher,
// reload it before Load returns. Thus [WithPluginMaxConfNum], go-cni's
// file order, and configs given as bytes mean what go-cni says, and the
// engine sees exactly the loaded networks. That conf dir lives in a
// directory of the face's own under <os.TempDir()>/ocicni-gocni-<euid>
// (0700, owned by the process's user, or else a fresh temporary
// directory), locked while the face lives. [Face.Shutdown] removes it;
// as go-cni has no Shutdown and containerd never calls it, [New] also
// removes the directories of faces whose lock no live process holds.
//
// The face does not depend on the caller's watcher alone: a Setup, Check
// or Status that finds fewer networks than [WithMinNetworkCount] asks for
// runs the last load's options again first, so a conf file moved away and
// back is picked up without another Load. A setup that finds a network
// missing from the engine's conf dir writes it again and retries once.
//
// # Differences from go-cni
//
//   - Setup is serial, and rolls back.
//   - Remove is best effort across networks and works from the cache
//     when no network is loaded; go-cni's returns at the first failure and
//     refuses to run before a successful Load.
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
//
// # Locking
//
// The face takes its load lock, then its config lock; neither is held
// while a pod's plugins run. Pod operations of one sandbox are serialized
// by the engine; see package ocicni.
package cni
