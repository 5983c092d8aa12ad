// Package netconf loads the CNI network configuration that package
// ocicni's manager attaches pods to: it reads the conf dir (or configs
// held in memory, see [MemorySource]), probes plugin binaries with VERSION, and publishes the result as an immutable [Set]
// that readers take without locks. It knows nothing of the manager: the
// manager reads what a [Loader] exposes ([Loader.Snapshot],
// [Loader.Lookup], [Loader.Published]) and asks it for loads
// ([Loader.Load], [Loader.RequestLoad]); the loader never calls back.
//
// # Words
//
// A load reads the conf dir, builds a new set from it and publishes it.
// To publish is to swap the new set in atomically and wake whoever waits
// for a publication. Every load runs the same code, whatever started it:
// [New] (the first load), the watcher (a leading and a trailing load per
// burst of changes), [Loader.Load] (a caller that waits for it and gets
// its error) or a request ([Loader.RequestLoad], from a lookup that
// misses or from a VERSION answer that a load stopped waiting for). In
// package ocicni's API and in log and error messages, which runtimes and
// operators already read, a load is called a reload (Manager.Reload,
// WithReloadDebounce, "CNI config reload failed").
//
// # Loading
//
// A load reads the ".conflist", ".conf" and ".json" files of the conf dir
// in file name order; a ".conf" or ".json" file becomes a single-plugin
// list. A ".conflist" that does not set loadOnlyInlinedPlugins gets the
// ".conf" plugin configs of its sub-folder <confdir>/<network name>/
// appended, in file name order, as libcni 1.3 does, and its bytes (which
// libcni caches at ADD) are rewritten to hold every plugin, so that a DEL
// from the cache runs them all.
//
// The conf dir is not trusted. Only regular files, or symlinks to them, of
// at most [MaxConfigFileSize] bytes are read, never with a blocking open
// (see package fsutil). A network name must pass the checks of a
// requested network's name and libcni's own, and a plugin type must be a
// plain file name ([ValidPluginType]), or the file is skipped as invalid.
//
// A file that cannot be used is skipped, and the set records why as a
// [ConfigError]; a lookup of its network fails with a
// [NetworkNotFoundError] that carries the reason. When two files declare
// one network, the first in name order wins. The default network is the
// fixed one ([Config].DefaultNetwork) or else the first valid file's.
//
// A load re-parses only the files whose size, times or inode changed
// (see fileStamp), and a file that turns invalid keeps its last valid
// parse, so that a file being rewritten by a non-atomic writer does not
// drop its network. An unreadable conf dir fails the load and leaves the
// published set as it was.
//
// # Configs held in memory
//
// A loader created with [Config].Memory reads the configs of a
// [MemorySource] instead of a conf dir: config lists that a caller has
// parsed itself (package gocni, whose users hand it their networks) and
// hands over with [MemorySource.Set] before it calls [Loader.Load]. Each
// one is parsed and checked as a ".conflist" file is, in the given order
// instead of file name order, and the set is built the same way: the same
// checks, VERSION probes, default network, skips and [ConfigError]s, with
// the config's [MemoryConfig].Name where a file's path would be. Only the
// disk's concerns are left out: a config held in memory has no sub-folder,
// is never half-written (so an invalid one keeps no last valid parse), and
// is not watched; [NetworkNotFoundError].ConfDir is "memory".
//
// # VERSION
//
// Every plugin binary that a file uses must answer VERSION with the
// file's cniVersion among its supported versions. A binary is asked once
// per path, size, times and inode: an answer and a failure (an error, or
// no answer within [Config].VersionTimeout) are both remembered until it
// changes. The calls of distinct binaries run concurrently, a few at a
// time, each in a goroutine of its own under context.Background() bounded
// by its timeout: no caller's context cancels one. [Loader.Shutdown] does:
// it cuts the calls in flight short (see Lifecycle), and a call cut short
// is forgotten rather than remembered as a failure. A load waits for the
// answers for [Config].VersionWait; a network whose plugins have not
// answered by then is skipped with [ErrVersionPending], or keeps the
// network it had in the last set, and the answer requests the load that
// brings it in. So one hung plugin does not hold up the other networks.
//
// # Publication
//
// A set is never modified once published. Sets are published in the
// order in which their loads read the conf dir: a load that finishes after
// a later one has published publishes nothing, so a slow load never
// overwrites a newer set. [Loader.Published] returns a channel that the
// next publication closes.
//
// # Requests and lookups
//
// [Loader.RequestLoad] asks for a load that reads the conf dir after the
// call. Requested loads run one at a time in a goroutine of the loader's,
// under context.Background(): a caller that stops waiting does not cut a
// load short for the others. The requests that arrive while one runs
// share the next. [Loader.Lookup] finds a network in a set, and when it is
// missing requests a load and waits for it, and while the network waits
// only for a VERSION answer, for the load that follows the answer; the
// caller's context bounds only its own wait.
//
// # Watching
//
// With [Config].Watch the loader watches the conf dir, its sub-folders and
// the bin dirs with fsnotify, and each target's parent (or nearest
// existing ancestor), so that a dir created late, or deleted and
// recreated, is picked up. A dir made below a watched one before its own
// watch is in place makes no event, so each change of the dirs is
// followed by passes that list the dirs and watch them until a pass finds
// none new, and then by a load: a conf dir made several levels deep, and
// the files written into it before its watch, are seen at once, not at
// the resync. The watches are checked again every 30 s in case an event
// was lost, and every second while the conf dir is missing: a watch added
// to an ancestor that is being removed, as a tree is removed and made
// again at once, is dead, and gets no event of the new tree. A file staged in the conf dir under a name that
// is not read (such as 10-a.conflist.tmp) counts only when it is renamed
// into place. The first event of a burst loads at once, and the events
// that follow within the debounce window are gathered into one trailing
// load (at most a second after the burst began). The leading load is
// provisional: a new file that it cannot read or parse may be half-written,
// so it is logged at Debug, and at Warn only if the trailing load still
// cannot use it.
//
// # Lifecycle
//
// [New] puts the watches in place, runs the first load and starts the
// watcher. [Loader.Shutdown] stops the watcher and waits for it and for
// the requested loads, which stop waiting for VERSION answers. It cancels
// the VERSION calls in flight, so that the default executor kills their
// plugins, and waits for them only for a short grace, not for their
// timeout: a plugin that never answers does not hold it up. Their
// networks stay pending (or keep the config they had), and a load after
// Shutdown asks the binaries again. The loader keeps serving afterwards,
// as one without a watcher. It may be called twice.
//
// # Locking
//
// The loader's lock, a context-aware semaphore, is held while a load
// reads and parses the conf dir and while it publishes, never while a
// plugin runs. The lock order is: the loader's lock, then the VERSION
// cache's mutex, then the publication mutex; the requests' mutex is a
// leaf, and so is a [MemorySource]'s. [Loader.Snapshot] takes no lock, so readers never wait for a load.
//
// # Errors
//
// The sentinel errors and error types are package ocicni's public ones,
// re-exported there under the same names; their text starts with
// "ocicni:" for that reason. The loader logs what it cannot return: the
// failure of a load that no caller waits for, the networks that a
// publication loads or removes, and each skipped file once.
package netconf
