package ocicni

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Manager attaches pod sandboxes to CNI networks and detaches them again.
// It implements [CNIPlugin]. Create one with [New].
type Manager struct {
	opts options
	log  *logrus.Entry
	exec invoke.Exec
	cni  *libcni.CNIConfig
	// cniNoCache runs DELs that must not read the attachment's cache
	// entry (see plan.entryPath): its cache dir never exists.
	cniNoCache *libcni.CNIConfig
	cache      *cache.Cache

	// Lock order: gate, then the pod's lock in pods. Pod operations take
	// the gate shared, then their pod's lock. GC plans without any lock;
	// its DEL workers take, per stale container, the gate shared and then
	// that container's lock, exactly like a pod operation, and hold no
	// other lock; its GC verbs run with the gate exclusive and no pod lock.
	// Nothing waits for the gate exclusively while holding it shared or
	// holding a pod lock, so GC cannot deadlock with pod operations, and a
	// pod waits for at most one DEL of GC (that of its own container) or
	// for the GC verbs (bounded by gcVerbsBound). The gate prefers
	// readers: GC waiting for it exclusively holds back no pod operation,
	// so a pod never queues behind another sandbox's plugins; GC takes it
	// when no pod operation is in flight, or skips its verbs when its
	// context ends first. A background rollback drops the gate and keeps
	// only its pod's lock; a heal retry takes only its pod's lock. So no
	// node-wide lock is held while their plugins run. setups.mu and
	// healer.mu are leaves, taken under any of these and never held while
	// waiting. Pod operations never take the loader's
	// lock: a missing network makes them ask reloads for a reload and wait
	// for it with their context. The loader's lock comes before
	// reloads.mu. nets is an atomic pointer read without locks, so Status
	// and new pods never wait for a reload, and no lock that another pod or
	// Status needs is held while a plugin runs.
	gate    *gate
	pods    *podLocks
	setups  *setupTracker // setups in flight, watched by GC
	loader  *loader
	nets    atomic.Pointer[networkSet] // swapped only by publish
	reloads reloader

	ctx       context.Context // cancelled by Shutdown; owns the watcher
	cancel    context.CancelFunc
	watcher   *watcher       // nil without one; only its stats are read outside its goroutine
	wg        sync.WaitGroup // the watcher
	healer    *healer        // background DEL retries; its loop is counted in wg
	reloading *inflight      // reloads run by runReloads
	rollbacks *inflight      // background rollbacks (see SetupError)
	shutdown  sync.Once
}

var _ CNIPlugin = (*Manager)(nil)

// New creates a manager, loads the conf dir and, unless [WithoutWatcher]
// is given, starts watching it.
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
		o.exec = newDefaultExec()
	}
	exec := typedExec{inner: o.exec, env: o.pluginEnv, hook: o.pluginHook}
	m := &Manager{
		opts:  o,
		log:   o.log,
		exec:  exec,
		cni:   libcni.NewCNIConfigWithCacheDir(o.binDirs, o.cacheDir, exec),
		cache: cache.New(o.cacheDir),
		gate:  newGate(),
		pods:  newPodLocks(),

		setups:    newSetupTracker(),
		reloading: newInflight(),
		rollbacks: newInflight(),
	}
	m.cniNoCache = libcni.NewCNIConfigWithCacheDir(o.binDirs, filepath.Join(m.cache.Dir(), "ocicni", "no-cache"), exec)
	m.nets.Store(&networkSet{byName: map[string]*network{}, defaultName: o.defaultNet})
	m.reloads.changed = make(chan struct{})
	m.ctx, m.cancel = context.WithCancel(context.Background())
	// Reloads and VERSION calls outlive Shutdown, which only stops the
	// watcher; each call is bounded by its own timeout.
	versions := newVersionCache(context.Background(), exec, o.versionTimeout, func() { m.requestReload() })
	m.loader = newLoader(&m.opts, exec, m.log, versions, m.publish)

	// Watches go in before the first load, so that a file written between
	// the two is not missed.
	if o.watch {
		w, err := newWatcher(o.confDir, o.binDirs, o.debounce, m.watchReload, m.log)
		if err != nil {
			m.cancel()
			versions.close()
			return nil, err
		}
		m.watcher = w
	}
	m.healer = newHealer(m, o.heal)
	// An index of the results dir's names keeps a teardown's cost flat on
	// a node with thousands of entries; without one, each lists the dir.
	if err := m.cache.IndexResults(); err != nil {
		m.log.WithError(err).Debug("Listing the CNI results directory for every sandbox")
	}
	m.reload(m.ctx)
	if !o.heal.Disabled {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.healer.run(m.ctx)
		}()
	}
	if m.watcher != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.watcher.run(m.ctx)
		}()
	}
	return m, nil
}

// reload rebuilds the network set and publishes it, and returns the
// current set. ctx bounds the wait for the loader's lock and for VERSION
// answers. On an unreadable conf dir the previous set stays.
func (m *Manager) reload(ctx context.Context) *networkSet {
	return m.reloadWith(ctx, false)
}

// watchReload is the watcher's reload. A leading-edge reload is
// provisional (see [loader.load]); it reports whether the current set
// holds skips that no reload has confirmed yet, so that the watcher runs
// one that does.
func (m *Manager) watchReload(ctx context.Context, leading bool) (unconfirmed bool) {
	return len(m.reloadWith(ctx, leading).unconfirmed) > 0
}

func (m *Manager) reloadWith(ctx context.Context, provisional bool) *networkSet {
	if err := m.loader.load(ctx, provisional); err != nil {
		if ctx.Err() == nil {
			m.log.WithError(err).Error("CNI config reload failed; keeping the last good config")
		} else {
			m.log.WithError(err).Debug("CNI config reload abandoned")
		}
	}
	return m.nets.Load()
}

// publish swaps in a new set. The loader calls it with its lock held, so
// sets are published in the order in which the conf dir was read.
func (m *Manager) publish(set *networkSet) {
	old := m.nets.Swap(set)
	m.logChanges(old, set)
	m.reloads.broadcast()
}

func (m *Manager) logChanges(old, set *networkSet) {
	for name, n := range set.byName {
		if o := old.byName[name]; o == nil || o.file != n.file || !bytes.Equal(o.list.Bytes, n.list.Bytes) {
			m.log.WithFields(logrus.Fields{
				"network": name, "file": n.file,
				"type": n.list.Plugins[0].Network.Type,
			}).Info("Loaded CNI network")
		}
	}
	for name := range old.byName {
		if set.byName[name] == nil {
			m.log.WithField("network", name).Info("CNI network removed")
		}
	}
	if old.defaultName != set.defaultName {
		m.log.WithField("network", set.defaultName).Info("Default CNI network changed")
	}
	m.logSkips(old, set)
}

// snapshot returns the current network set.
func (m *Manager) snapshot() *networkSet { return m.nets.Load() }

// lookup finds a network by name. When it is missing, it asks for a
// reload, in case a file arrived that the watcher has not reported yet,
// and waits for it; while the network waits only for a plugin's VERSION
// answer, it waits for the reload that follows the answer. The reload runs
// under no caller's context; ctx bounds only this caller's wait.
func (m *Manager) lookup(ctx context.Context, set *networkSet, name string) (*network, *networkSet, error) {
	if n := set.byName[name]; n != nil {
		return n, set, nil
	}
	wait := m.requestReload()
	for {
		select {
		case <-wait:
		case <-ctx.Done():
			set = m.snapshot()
			return nil, set, fmt.Errorf("%w (gave up waiting for a reload: %w)", set.notFound(name, m.opts.confDir), ctx.Err())
		}
		wait = m.reloads.next() // taken before the set, so no publication is missed
		set = m.snapshot()
		if n := set.byName[name]; n != nil {
			return n, set, nil
		}
		if !set.pending(name) {
			return nil, set, set.notFound(name, m.opts.confDir)
		}
	}
}

// Name returns [CNIPluginName].
func (m *Manager) Name() string { return CNIPluginName }

// GetDefaultNetworkName returns the default network's name, or "" when
// there is none.
func (m *Manager) GetDefaultNetworkName() string { return m.snapshot().defaultName }

// Networks returns the names of the loaded networks, sorted.
func (m *Manager) Networks() []string { return m.snapshot().names() }

// Skipped returns why configuration files were not loaded, in file order.
func (m *Manager) Skipped() []*ConfigError {
	return append([]*ConfigError(nil), m.snapshot().skipped...)
}

// Shutdown stops the config watcher and the healing loop and waits for
// them, for the reloads and plugin VERSION calls already running (each
// bounded by its timeout), for background rollbacks (each bounded by
// [WithRollbackTimeout]) and for the DEL retries in flight (each bounded
// by [HealPolicy].Timeout). Retries not yet due stay recorded, and a
// manager started later on the same cache dir resumes them. As in
// cri-o/ocicni, the manager keeps serving every method afterwards, like a
// manager created [WithoutWatcher]: a request for a network that is not
// loaded reloads the conf dir. It is safe to call more than once.
func (m *Manager) Shutdown() error {
	m.shutdown.Do(m.cancel)
	m.wg.Wait()
	m.reloading.wait()
	m.loader.versions.wait()
	m.rollbacks.wait()
	m.healer.active.wait()
	_ = m.cache.Close() // what follows lists the results dir
	return nil
}
