package ocicni

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// Manager attaches pod sandboxes to CNI networks and detaches them again.
// It implements [CNIPlugin]. Create one with [New].
//
// A Manager only dispatches: each exported method hands its call to one
// part, and the parts share the engine (see the package doc, "Map").
type Manager struct {
	e        *engine
	setup    *attacher  // SetUpPod: attach.go, repeat.go
	teardown *detacher  // TearDownPod, ForgetPodCache and the DEL retries: teardown.go, forget.go
	gc       *collector // GC: gc.go, gcplan.go, gcdel.go, gcpace.go
	status   *checker   // GetPodNetworkStatus, Status: status.go

	ctx      context.Context // cancelled by Shutdown; owns the healing loop
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the healing loop
	shutdown sync.Once
}

// engine is what the parts of a Manager share: the options, as data; the
// store of what each sandbox holds; the plugin runner; the locks; the
// loaded networks; telemetry. Its methods are the services every part
// uses: the network set, a pod's locks (locks.go), a DEL's plan
// (plan.go), an operation's span (telemetry.go).
type engine struct {
	opts  options
	log   *logrus.Entry
	exec  invoke.Exec
	cni   *cniRunner
	store *store // the inventory and the records: see inventory.go
	tel   *telemetry.Recorder

	// Lock order: see the package doc, Locking. gate is the GC gate (held
	// shared by pod operations and GC's DELs, exclusively only for the GC
	// verbs); pods holds one lock per sandbox; setups' and healer's own
	// locks are leaves. Pod operations take no lock of conf: its network
	// set is an immutable snapshot read without locks.
	gate   *locks.Gate
	pods   *locks.Keyed
	setups *setupTracker   // setups in flight, watched by GC
	admit  admissionQueues // pod operations' turns to run plugins; leaves, taken last
	conf   *netconf.Loader // the network sets: loading, VERSION, the watcher

	healer    *healer        // background DEL retries; its loop is counted in Manager.wg
	rollbacks bgwork.Tracker // background rollbacks (see SetupError)
}

// deleter runs the DELs of planned attachments, best effort, in order
// (see [detacher.deleteAll]): what setup's rollback and GC need of
// teardown.
type deleter interface {
	deleteAll(ctx context.Context, plans []*plan, log *logrus.Entry, why string) []Outcome
}

// attacher sets pods up (attach.go, repeat.go).
type attacher struct {
	*engine
	detach deleter // rolls back what a failed setup attached
}

// detacher tears pods down, forgets their cache files and retries failed
// DELs for the healer (teardown.go, forget.go).
type detacher struct{ *engine }

// collector is GC (gc.go, gcplan.go, gcdel.go, gcpace.go).
type collector struct {
	*engine
	detach deleter // runs the stale attachments' DELs
}

// checker answers CHECK and STATUS (status.go).
type checker struct{ *engine }

// networkSet and network are the loaded configuration, as package netconf
// publishes it: an immutable snapshot of the networks, and one network.
type (
	networkSet = netconf.Set
	network    = netconf.Network
)

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
		opts: o,
		log:  o.log,
		exec: exec,
		tel:  tel,
		gate: locks.NewGate(o.gatePatience),
		pods: locks.NewKeyed(),

		setups: newSetupTracker(),
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
	td := &detacher{engine: e}
	e.healer = newHealer(o.heal, e.log, td.retryDELs, func() bool { return e.setups.busy(defaultGCPace.window) })
	e.store = &store{led: led, heal: o.heal, track: e.healer.track}
	m := &Manager{
		e: e, teardown: td,
		setup:  &attacher{engine: e, detach: td},
		gc:     &collector{engine: e, detach: td},
		status: &checker{engine: e},
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
	if err := led.RecoverCommits(); err != nil {
		e.log.WithError(err).Warn("Cannot list the record changes that a crash cut short; GC tries again")
	}
	if !o.heal.Disabled {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			e.healer.run(m.ctx, e.store)
		}()
	}
	return m, nil
}

// snapshot returns the current network set.
func (e *engine) snapshot() *networkSet { return e.conf.Snapshot() }

// lookup finds a network by name in set; when it is missing, it waits,
// within ctx, for a load that may bring it (see netconf.Loader.Lookup).
func (e *engine) lookup(ctx context.Context, set *networkSet, name string) (*network, *networkSet, error) {
	return e.conf.Lookup(ctx, set, name)
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
		if m.e.opts.memory != nil {
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
