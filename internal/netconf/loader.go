package netconf

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

// Config configures a [Loader]. Every field but Exec and Log has a
// meaningful zero value.
type Config struct {
	ConfDir string   // the directory of network configuration files
	BinDirs []string // where plugin binaries are looked for
	// Memory, when set, holds the configs that loads read instead of
	// ConfDir: the loader then reads no directory and starts no watcher,
	// whatever ConfDir and Watch say. See [MemorySource].
	Memory *MemorySource
	// DefaultNetwork fixes the default network's name; "" makes it the
	// first valid file's network, following the directory (or the order
	// of the configs held in memory).
	DefaultNetwork string
	// Exec finds plugin binaries and runs their VERSION. A FindInPath
	// error that does not wrap [ErrPluginNotFound] yet is wrapped in it.
	Exec invoke.Exec
	Log  *logrus.Entry
	// Watch starts the watcher: a load on every burst of changes in the
	// conf dir, its sub-folders and the bin dirs, Debounce apart (see
	// [Loader]). It is ignored with Memory.
	Watch    bool
	Debounce time.Duration
	// VersionWait is how long a load waits for VERSION answers
	// ([DefaultVersionWait] when 0), VersionTimeout how long one VERSION
	// call may take ([DefaultVersionTimeout] when 0).
	VersionWait    time.Duration
	VersionTimeout time.Duration
	// Published, when set, is called after each new set is published,
	// with the loader's lock held: it must not block.
	Published func()

	newFSW  func() (*fsnotify.Watcher, error)                   // makes the watcher's fsnotify watcher; tests set it
	wrapAdd func(add func(dir string) error) func(string) error // wraps its adds of watches; tests set it
}

// Loader owns the network configuration: it reads the conf dir (or the
// configs held in a [MemorySource]), probes plugin binaries with VERSION,
// publishes each new [Set] atomically, and, with [Config].Watch, loads
// again on every burst of changes. See the package doc.
type Loader struct {
	confDir  string        // read unless memory is set
	memory   *MemorySource // nil: the configs are the conf dir's files
	source   string        // names the source in errors: the conf dir, or memorySourceName
	binDirs  []string
	fixed    string // the default network's fixed name, if any
	exec     invoke.Exec
	log      *logrus.Entry
	onPub    func()        // Config.Published; nil: none
	wait     time.Duration // how long a load waits for VERSION answers
	versions *versionCache
	watcher  *watcher // nil without one; only its stats are read outside its goroutine

	// lock is a 1-slot semaphore, so that waiting for it respects the
	// context. It guards files, gen and published, and is held for every
	// store to current. Lock order: lock, then versionCache.mu, then
	// pub.mu (in publish). reqs.mu is a leaf, never held with another;
	// so is memory.mu, taken under lock.
	lock      chan struct{}
	files     map[string]*parsedFile // by path, or by a memory config's name
	gen       uint64                 // loads that have read the conf dir
	published uint64                 // gen of the load that published last

	// current is the set published last, read without locks; stored only
	// by publish.
	current atomic.Pointer[Set]
	pub     publications
	reqs    requests

	cancel context.CancelFunc // stops the watcher
	wg     sync.WaitGroup     // the watcher goroutine
	stop   sync.Once
}

// New creates a loader and runs its first load before it returns; a
// failure of that load (an unreadable conf dir) is logged, and leaves the
// set empty until a later load succeeds. With [Config].Watch, the watches
// are in place before the first load, so that a file written between the
// two is not missed, and the watcher runs until [Loader.Shutdown]. Where
// inotify cannot serve the watcher, it polls (see [Loader.WatchHealth]).
func New(cfg Config) (*Loader, error) {
	if cfg.VersionWait == 0 {
		cfg.VersionWait = DefaultVersionWait
	}
	if cfg.VersionTimeout == 0 {
		cfg.VersionTimeout = DefaultVersionTimeout
	}
	l := &Loader{
		confDir: cfg.ConfDir,
		memory:  cfg.Memory,
		source:  cfg.ConfDir,
		binDirs: cfg.BinDirs,
		fixed:   cfg.DefaultNetwork,
		exec:    cfg.Exec,
		log:     cfg.Log,
		wait:    cfg.VersionWait,
		onPub:   cfg.Published,
		lock:    make(chan struct{}, 1),
		files:   make(map[string]*parsedFile),
		pub:     publications{next: make(chan struct{})},
	}
	// An answer that a load stopped waiting for brings its network in
	// through a load of its own.
	l.versions = newVersionCache(cfg.Exec, cfg.VersionTimeout, func() { l.RequestLoad() })
	if l.memory != nil {
		l.source = memorySourceName
	}
	l.current.Store(NewSet(l.source, cfg.DefaultNetwork))
	if cfg.Watch && l.memory == nil { // configs held in memory have nothing to watch
		l.watcher = newWatcher(cfg.ConfDir, cfg.BinDirs, cfg.Debounce, l.watchLoad, cfg.Log, cfg.newFSW, cfg.wrapAdd)
	}
	l.loadOrLog(context.Background(), false)
	if l.watcher != nil {
		var ctx context.Context
		ctx, l.cancel = context.WithCancel(context.Background())
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.watcher.run(ctx)
		}()
	}
	return l, nil
}

// Snapshot returns the set published last. It never waits.
func (l *Loader) Snapshot() *Set { return l.current.Load() }

// Shutdown stops the watcher and waits for it and for the requested loads
// that are running or due (see [Loader.RequestLoad]). It cuts the VERSION
// calls in flight short: it cancels their context, so that the default
// executor kills their plugins' process groups, and waits for them at
// most a short grace, not for their timeout: a call whose executor
// ignores the cancellation runs on in the background. A call cut short is
// forgotten, neither published nor remembered as a failure: its network
// stays pending (or keeps the config it had), and a later load asks the
// binary again. While Shutdown runs, loads start no VERSION call and stop
// waiting for answers, and a [Loader.Lookup] stops waiting for one. The
// loader keeps serving afterwards, as one created without a watcher:
// [Loader.Load], [Loader.RequestLoad] and [Loader.Lookup] still load, and
// ask plugins VERSION again. It is safe to call more than once, also
// concurrently.
func (l *Loader) Shutdown() {
	l.stop.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
	})
	calls := l.versions.cutShort()
	defer l.versions.endCut()
	l.wg.Wait()
	l.reqs.active.Wait()
	waitCut(calls, versionCutGrace)
}

func (l *Loader) acquire(ctx context.Context) error {
	select {
	case l.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Loader) release() { <-l.lock }
