package cni

import (
	"context"
	"runtime"
	"sync"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// CNI is go-cni's interface, with exactly its methods: runtimes keep fakes
// that implement it, so it never grows. What the face adds lives on
// [*Face].
type CNI interface {
	// Setup attaches the sandbox to every loaded network, one after the
	// other, and returns the combined result.
	Setup(ctx context.Context, id string, path string, opts ...NamespaceOpts) (*Result, error)
	// SetupSerially is Setup: both attach serially.
	SetupSerially(ctx context.Context, id string, path string, opts ...NamespaceOpts) (*Result, error)
	// Remove detaches the sandbox from every network it was attached to.
	Remove(ctx context.Context, id string, path string, opts ...NamespaceOpts) error
	// Check runs CHECK for the sandbox on every loaded network.
	Check(ctx context.Context, id string, path string, opts ...NamespaceOpts) error
	// Load replaces the loaded networks.
	Load(opts ...Opt) error
	// Status reports whether enough networks are loaded and ready.
	Status() error
	// GetConfig returns a copy of the loaded configuration.
	GetConfig() *ConfigResult
}

var _ CNI = (*Face)(nil)

// Face is the go-cni face over the engine: every plugin run goes through
// an [ocicni.Manager]. [New] returns one; its methods beyond [CNI] (GC,
// Engine, Shutdown) are reached with a type assertion.
type Face struct {
	engine *ocicni.Manager
	tel    *telemetry.Recorder // the face verbs' spans
	// src holds the loaded networks (loopback excepted) for the engine,
	// which loads them from memory instead of a conf dir.
	src *netconf.MemorySource

	// Lock order: loadMu, then mu. Neither is held while a pod's plugins
	// run; loadMu is held while a load reads the conf dir and the engine
	// reloads.
	loadMu   sync.Mutex   // serializes loads and the engine's source
	mu       sync.RWMutex // guards cfg and lastLoad
	cfg      config
	lastLoad []Opt // the options of the last load, run again by ready

	// collected shuts the engine down once the face is unreachable; see
	// New. Shutdown stops it.
	collected runtime.Cleanup
}

// New returns a [CNI] whose dynamic type is [*Face]. It applies opts in
// order (options that load networks load them now, as go-cni's do),
// starts the engine without a config watcher on the loaded networks,
// which the face hands it in memory, and remembers opts as the last load.
func New(opts ...Opt) (CNI, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	tel, err := newRecorder(cfg.tracerProvider)
	if err != nil {
		return nil, err
	}
	src := &netconf.MemorySource{}
	engineOpts := make([]ocicni.Option, 0, len(cfg.engineOpts)+4)
	engineOpts = append(engineOpts, ocicni.WithBinDirs(cfg.pluginDirs...), ocicni.WithArgsAsGiven(), ocicni.WithGCScopedToLoadedNetworks())
	engineOpts = append(engineOpts, cfg.engineOpts...)
	engineOpts = netconf.WithMemorySource(engineOpts, src) // also turns the engine's watcher off
	engine, err := ocicni.New(engineOpts...)
	if err != nil {
		return nil, err
	}
	cfg.engineOpts = nil
	f := &Face{engine: engine, tel: tel, src: src, cfg: cfg, lastLoad: opts}
	f.loadMu.Lock()
	loadErr := f.publish(cfg.networks)
	f.loadMu.Unlock()
	if loadErr != nil {
		_ = f.Shutdown() // never fails
		return nil, loadErr
	}
	// Code written for go-cni has no Shutdown to call, and may call New
	// more than once: a face that becomes unreachable shuts its engine
	// down (its healing loop, its index of the cache dir), off the
	// cleanup goroutine since Shutdown waits. Nothing the engine holds
	// refers back to the face.
	f.collected = runtime.AddCleanup(f, func(m *ocicni.Manager) {
		go func() { _ = m.Shutdown() }()
	}, engine)
	return f, nil
}

// Engine returns the engine, for what go-cni has no method for
// (PendingTeardowns, TearDownPodOutcomes, NetworkStatuses...).
func (f *Face) Engine() *ocicni.Manager { return f.engine }

// Shutdown stops the engine (see [ocicni.Manager.Shutdown]). Call it
// last: the face does not serve afterwards. The face keeps nothing on
// disk of its own, so a runtime that never calls Shutdown (go-cni has
// none) leaves nothing behind either, and a face that becomes
// unreachable without it shuts its engine down when the garbage
// collector finds it so.
func (f *Face) Shutdown() error {
	f.collected.Stop()
	return f.engine.Shutdown()
}

// GetConfig returns a copy of the configuration and of the loaded
// networks, the loopback network included.
func (f *Face) GetConfig() *ConfigResult {
	f.mu.RLock()
	cfg := f.cfg
	f.mu.RUnlock()
	r := &ConfigResult{
		PluginDirs:       append([]string(nil), cfg.pluginDirs...),
		PluginConfDir:    cfg.confDir,
		PluginMaxConfNum: cfg.maxConfNum,
		Prefix:           cfg.prefix,
	}
	for _, n := range cfg.networks {
		l := &NetworkConfList{Name: n.config.Name, CNIVersion: n.config.CNIVersion, Source: string(n.config.Bytes)}
		for _, p := range n.config.Plugins {
			l.Plugins = append(l.Plugins, &NetworkConf{Network: p.Network, Source: string(p.Bytes)})
		}
		r.Networks = append(r.Networks, &ConfNetwork{Config: l, IFName: n.ifName})
	}
	return r
}
