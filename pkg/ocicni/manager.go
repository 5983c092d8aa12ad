package ocicni

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Manager attaches pod sandboxes to CNI networks and detaches them again.
// It implements [CNIPlugin]. Create one with [New].
//
// A Manager only dispatches: each exported method hands its call to one
// part, and the parts share the engine (see the package doc, "Map").
type Manager struct {
	e        *engine
	setup    *attacher  // SetUpPod: attach.go
	teardown *detacher  // TearDownPod, ForgetPodCache and the DEL retries: teardown.go, forget.go
	gc       *collector // GC: gc.go, gcplan.go, gcdel.go, gcpace.go
	status   *checker   // GetPodNetworkStatus, Status: status.go

	ctx      context.Context // cancelled by Shutdown; owns the healing loop
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the healing loop
	shutdown sync.Once
}

var _ CNIPlugin = (*Manager)(nil)

// New creates a manager, loads the conf dir and, unless [WithoutWatcher]
// is given, starts watching it.
//
// Created on a thread locked in another network namespace than the
// process's (BuildKit creates its CNI in RootlessKit's detached
// namespace), the manager starts every plugin in that namespace, whatever
// goroutine runs it: rollbacks, DEL retries and GC included, so that the
// host side of an attachment is made and removed where it lives.
// Otherwise a plugin starts in its calling thread's namespace, as libcni
// starts it. (The default executor only: one of [WithExec] starts its
// plugins as it will.)
func New(opts ...Option) (*Manager, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = logrus.NewEntry(logrus.StandardLogger())
	}
	if o.exec == nil {
		o.exec = pluginexec.New(os.Stderr)
	}
	tel, err := newRecorder(&o)
	if err != nil {
		return nil, fmt.Errorf("ocicni: creating the OpenTelemetry instruments: %w", err)
	}
	exec := managedExec{inner: o.exec, env: o.pluginEnv, hook: o.pluginHook, tel: tel}
	if exec.home, err = netns.ThreadNS(); err != nil {
		o.log.WithError(err).Warn("Cannot tell the network namespace the manager is created in; plugins start in their caller's")
	}
	led := ledger.New(o.cacheDir)
	e := &engine{
		opts: engineOptions{
			argsAsGiven: o.argsAsGiven, timeouts: o.timeouts, gatePatience: o.gatePatience,
			confDir: o.confDir, fromMemory: o.memory != nil,
		},
		log:  o.log,
		exec: exec,
		tel:  tel,
		gate: locks.NewGate(o.gatePatience),
		pods: locks.NewKeyed(),

		setups: newSetupTracker(),
		fresh:  newFreshAdds(o.freshWindow),
		admit:  newAdmissionQueues(o.admission),
	}
	e.cni = newCNIRunner(o.binDirs, led, exec)
	conf, err := netconf.New(netconf.Config{
		ConfDir: o.confDir, Memory: o.memory, BinDirs: o.binDirs, DefaultNetwork: o.defaultNet,
		Exec: exec, Log: e.log,
		Watch: o.watch, Debounce: o.debounce,
		VersionWait: o.versionWait, VersionTimeout: o.versionTimeout,
		Published: func() { tel.Reloaded(context.Background()) },
	})
	if err != nil {
		led.Close()
		return nil, err
	}
	e.conf = conf
	td := &detacher{engine: e, opts: teardownOptions{policy: o.policy, delStopAtCode3: o.delStopAtCode3, heal: o.heal}}
	e.healer = newHealer(o.heal, e.log, td.retryDELs, func() bool { return e.setups.busy(defaultGCPace.window) })
	e.store = &sandboxStore{led: led, heal: o.heal, track: e.healer.track, unsettled: e.healer.unsettle}
	e.store.fault.log = e.log
	led.SetTakeover(locks.Takeover{After: e.takeoverAfter, Log: e.tookOver})
	m := &Manager{
		e: e, teardown: td,
		setup: &attacher{engine: e, detach: td, opts: setupOptions{
			netns: o.netns, rollbackTimeout: o.rollbackTimeout,
		}},
		gc: &collector{engine: e, detach: td, opts: gcOptions{
			binDirs: o.binDirs, gcScope: o.gcScope, configGrace: o.configGrace, gcPace: o.gcPace, gcWorkers: o.gcWorkers,
		}},
		status: &checker{engine: e, opts: statusOptions{netns: o.netns}},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if err := tel.Observe(e.gauges()); err != nil {
		e.conf.Shutdown()
		led.Close()
		return nil, fmt.Errorf("ocicni: registering the OpenTelemetry gauges: %w", err)
	}
	// An index of the results dir's names keeps a teardown's cost flat on
	// a node with thousands of entries; without one, each lists the dir.
	if err := led.Open(); err != nil {
		e.log.WithError(err).Debug("Listing the CNI results directory for every sandbox")
	}
	e.store.recover(e.log, "GC")
	if !o.heal.Disabled {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			e.healer.run(m.ctx, e.store)
		}()
	}
	return m, nil
}

// Reload reads the conf dir now and publishes the new network set before
// it returns, for callers that own reloads, such as the go-cni face
// (package gocni), whose users call Load when their own watcher sees a
// change. It works with or without the watcher. ctx bounds the wait for
// the loader's lock and for plugins' VERSION answers (a network still
// waiting for one is reported by [Manager.Skipped] with
// [ErrVersionPending]). On an error, such as an unreadable conf dir, the
// last good set stays.
func (m *Manager) Reload(ctx context.Context) error {
	if err := m.e.conf.Load(ctx); err != nil {
		from := m.e.opts.confDir
		if m.e.opts.fromMemory {
			from = "the networks held in memory"
		}
		return fmt.Errorf("ocicni: reloading %s: %w", from, err)
	}
	return nil
}

// Name returns [CNIPluginName].
func (m *Manager) Name() string { return CNIPluginName }

// GetDefaultNetworkName returns the default network's name, or "" when
// there is none.
func (m *Manager) GetDefaultNetworkName() string { return m.e.snapshot().DefaultName() }

// Networks returns the names of the loaded networks, sorted.
func (m *Manager) Networks() []string { return m.e.snapshot().Names() }

// Skipped returns why configuration files were not loaded, in file order.
func (m *Manager) Skipped() []*ConfigError { return m.e.snapshot().Skipped() }

// Health reports the node's faults that the manager works around: lock
// files it cannot use, a watcher it cannot make (see [Health]).
func (m *Manager) Health() Health { return m.e.health() }

// Shutdown stops the config watcher and the healing loop and waits for
// them and for the reloads already running. It cuts the plugin VERSION
// calls in flight short: their plugins are killed, and one that ignores
// that is not waited for, so a plugin that never answers VERSION does not
// hold Shutdown up, and it returns within a second. A network whose
// VERSION call it cut short stays pending (see [ErrVersionPending]), and
// its plugin is asked again by the next reload.
//
// That bound does not cover the work Shutdown still waits for, each piece
// bounded by its own timeout only, since cutting it short would leave
// what it removes half removed: background rollbacks (each bounded by
// [WithRollbackTimeout]) and the DEL retries in flight (each bounded by
// [HealPolicy].Timeout). Retries not yet due stay recorded, and a manager
// started later on the same cache dir resumes them. As in cri-o/ocicni,
// the manager keeps serving every method afterwards, like a manager
// created [WithoutWatcher]: a request for a network that is not loaded
// reloads the conf dir. It is safe to call more than once.
func (m *Manager) Shutdown() error {
	m.shutdown.Do(m.cancel)
	m.e.conf.Shutdown()
	m.wg.Wait()
	m.e.rollbacks.Wait()
	m.e.healer.active.Wait()
	m.e.store.led.Close() // another engine's GC no longer waits for what this one did; teardowns list the results dir
	if err := m.e.tel.Close(); err != nil {
		return fmt.Errorf("ocicni: unregistering the OpenTelemetry gauges: %w", err)
	}
	return nil
}

// SetUpPod attaches the pod to its networks. See [Manager.SetUpPodWithContext].
func (m *Manager) SetUpPod(pod PodNetwork) ([]NetResult, error) {
	return m.SetUpPodWithContext(context.Background(), pod)
}

// SetUpPodWithContext brings up lo in the pod's netns and attaches the
// requested networks in order (the default network when none are named).
// It returns one result per network, in request order. When an ADD fails,
// the attachments this call made so far and the failed one are deleted
// again (rollback) before the error, a *[SetupError], is returned. An
// attachment the sandbox already holds live (see [AttachedError]) is not
// added again: when it is identical to the request,
// its cached result is returned; otherwise the call fails with an
// *[AttachedError] before anything runs.
func (m *Manager) SetUpPodWithContext(ctx context.Context, pod PodNetwork) ([]NetResult, error) {
	return m.setup.setUp(ctx, pod)
}

// ForgetPodCache drops the libcni cache entries of the sandbox pod.ID, on
// purpose, from the configured cache dir, and returns the paths it
// removed. It is the replacement for deleting
// /var/lib/cni/results/*<id>* by hand, which CRI-O does after a failed
// teardown: before any file goes, every attachment the entries name is
// added to the sandbox's attachment order record (with its netns and its
// cached config, saved next to the record), so that a later [Manager.GC]
// that does not list the sandbox as valid still runs DEL for it, with
// that config, and releases what the plugins hold. Each dropped entry is logged.
//
// Only pod.ID is used (and pod.NetNS, for entries that name no netns).
// ForgetPodCache runs no plugin. The record's lines and the removals are
// one change: when it fails, nothing is removed and the record is as it
// was.
func (m *Manager) ForgetPodCache(ctx context.Context, pod PodNetwork) ([]string, error) {
	return m.teardown.forget(ctx, pod)
}

// GC deletes every attachment in its scope that does not belong to a pod
// in validPods (by default what this library owns; see
// [WithGCScopedToLoadedNetworks] and [WithGCAllNetworks]), then sends the
// GC verb with the valid attachments to every loaded network at CNI 1.1.0
// or later that does not set disableGC. It continues past
// every error and returns them joined. It is [Manager.GCOutcomes] without
// the outcomes; GCOutcomes' doc says what it deletes and what it keeps.
func (m *Manager) GC(ctx context.Context, validPods []*PodNetwork) error {
	_, err := m.GCOutcomes(ctx, validPods)
	return err
}

// GCOutcomes is [Manager.GC] that also returns the [Outcome] of every
// stale attachment GC acted on or could not act on.
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
// GC does not stop pod operations while it runs (see the package doc, "Locking"). It plans
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
// The outcomes come in this order: first the corrupt cache files that
// name no container GC could tell (Failed, with what their name says);
// then, for each stale container in the order planned, the attachments no
// DEL can act on (a corrupt cache entry without a config to delete it
// with, or one that cannot be planned: Failed), and then its DELs in the
// order they ran (Deleted, AlreadyGone, RetryLater, Failed, Orphaned or
// NoConfig; RetryLater with ctx's error for each when ctx ended before GC
// held the container's lock, or when GC kept the rest of ctx's deadline
// for its GC verbs: see above). An outcome is a failure exactly when
// [Outcome.Failure] says so: GC applies no [TeardownPolicy], so none is
// Tolerated. Left out are the attachments of valid pods, those a teardown
// deleted after GC planned (the teardown reports them), and those of a
// sandbox whose setup began while GC ran, and what is out of GC's scope
// (another runtime's attachments by default; see above): GC did not act
// on them.
//
// The error joins every failure, each naming its network: those of the
// failed outcomes, each a *[NetworkError], and those with no outcome (a
// cache that cannot be listed, a bad valid pod, the GC verbs). A network not sent
// the verb gets a *[NetworkError] matching [ErrGCVerbsSkipped] and the
// context's error (context.DeadlineExceeded when the verbs used up their
// 10 s). GCOutcomes never modifies validPods.
func (m *Manager) GCOutcomes(ctx context.Context, validPods []*PodNetwork) ([]Outcome, error) {
	return m.gc.run(ctx, validPods)
}

// Inventory returns what the cache dir holds of sandbox id, as a teardown
// of it that names no networks finds it: the cache files named for it
// (see [cache.Cache.ForContainer]) and its order record, with the loaded
// networks deciding which corrupt files can be deleted. A sandbox of which
// nothing is known has an empty inventory. It takes no lock and runs no
// plugin. The error is for an invalid id ([InvalidArgumentError]) or a
// results directory that cannot be listed.
func (m *Manager) Inventory(id string) (*SandboxInventory, error) {
	return m.e.store.sandboxInventory(id, m.e.snapshot())
}

// Inventories returns, sorted by container ID, the inventory of every
// sandbox that the cache dir's results or order records know of, from one
// listing of the results directory and one reading of the order records,
// as GC plans from them. A corrupt file whose content cannot tell its
// container has its names guessed from its file name as GC guesses them:
// around the container ID of an order record or of a readable entry, else
// after the name of a loaded network or of a readable entry's network
// (GC also knows the valid pods and the setups in flight). The files that
// name no container even then are returned in unowned. It takes no lock
// and runs no plugin. The error is for a results or records directory
// that cannot be listed.
func (m *Manager) Inventories() (inventories []*SandboxInventory, unowned []*cache.EntryError, err error) {
	return m.e.store.sandboxInventories(m.e.snapshot())
}

// PendingTeardowns lists, from the order records in the cache dir, every
// attachment whose DEL failed and has not succeeded since, sorted by
// container and ADD order. It reads the records of every manager that
// shares the cache dir.
func (m *Manager) PendingTeardowns() ([]PendingTeardown, error) { return m.e.store.pendingTeardowns() }

// GetPodNetworkStatus returns the pod's attachments. See
// [Manager.GetPodNetworkStatusWithContext].
func (m *Manager) GetPodNetworkStatus(pod PodNetwork) ([]NetResult, error) {
	return m.GetPodNetworkStatusWithContext(context.Background(), pod)
}

// GetPodNetworkStatusWithContext returns one result per attachment: the
// requested networks; with none requested, the attachments recorded at ADD
// in ADD order (the default network first), else the container's cache
// entries, else the default network. For each it runs CHECK when the
// network's version supports it, then returns the cached result; without
// one it reads the interface's addresses from the netns.
func (m *Manager) GetPodNetworkStatusWithContext(ctx context.Context, pod PodNetwork) ([]NetResult, error) {
	return m.status.podStatus(ctx, pod)
}

// Status reports whether the default network is usable. See
// [Manager.StatusWithContext].
func (m *Manager) Status() error { return m.StatusWithContext(context.Background()) }

// StatusWithContext returns an error while there is no default network,
// and runs the STATUS verb on it when its version is 1.1.0 or later. It
// never waits for plugins of pod operations or for a reload.
func (m *Manager) StatusWithContext(ctx context.Context) error {
	return m.status.status(ctx)
}

// NetworkStatuses runs STATUS on every loaded network whose version is
// 1.1.0 or later and reports each, sorted by network name.
func (m *Manager) NetworkStatuses(ctx context.Context) []NetworkStatus {
	return m.status.networkStatuses(ctx)
}

// TearDownPod detaches the pod. See [Manager.TearDownPodWithContext].
func (m *Manager) TearDownPod(pod PodNetwork) error {
	return m.TearDownPodWithContext(context.Background(), pod)
}

// TearDownPodWithContext runs DEL for every attachment of the pod, best
// effort: a failure never stops the DELs that follow. With pod.Networks
// empty, the attachments come from the libcni cache and the attachment
// order record; otherwise exactly the named ones are deleted. Under the
// strict policy it returns a *[TeardownError] naming every failure; under
// the tolerant policy it logs them and returns nil. See [TeardownError]
// for what it deletes and how.
func (m *Manager) TearDownPodWithContext(ctx context.Context, pod PodNetwork) error {
	_, err := m.teardown.tearDown(ctx, pod)
	return err
}

// TearDownPodOutcomes is [Manager.TearDownPodWithContext] that also returns
// the outcome of every attachment, in the order the DELs ran, whatever the
// policy.
func (m *Manager) TearDownPodOutcomes(ctx context.Context, pod PodNetwork) ([]Outcome, error) {
	return m.teardown.tearDown(ctx, pod)
}

// InitCNI takes a binary directory in which to search for CNI plugins, and
// a configuration directory in which to search for CNI JSON config files.
// If no valid CNI configs exist, network requests will fail until valid CNI
// config files are present in the config directory.
// If defaultNetName is not empty, a CNI config with that network name will
// be used as the default CNI network, and container network operations will
// fail until that network config is present and valid.
// If defaultNetName is empty, CNI config files should be reloaded real-time and
// defaultNetName should be changeable and determined by file sorting.
func InitCNI(defaultNetName, confDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithBinDirs(binDirs...))
}

// InitCNIWithCache works like InitCNI except that it takes the cni cache directory as third param.
func InitCNIWithCache(defaultNetName, confDir, cacheDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithCacheDir(cacheDir),
		WithBinDirs(binDirs...))
}

// InitCNINoInotify works like InitCNI except that it does not use inotify to watch for changes in the CNI config dir.
func InitCNINoInotify(defaultNetName, confDir, cacheDir string, binDirs ...string) (CNIPlugin, error) {
	return New(WithDefaultNetwork(defaultNetName), WithConfDir(confDir), WithCacheDir(cacheDir),
		WithBinDirs(binDirs...), WithoutWatcher())
}
