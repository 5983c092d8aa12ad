package ocicni

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/netconf"
)

// TeardownPolicy chooses what happens to DEL failures: [Strict] or
// [Tolerant]. [WithTeardownPolicy] sets the manager's default, and a
// network may override it with [TeardownPolicyKey] in its config file.
// (It is defined in the internal package that loads config files.)
type TeardownPolicy = netconf.TeardownPolicy

const (
	// Strict returns DEL failures to the caller so that it retries.
	Strict = netconf.Strict
	// Tolerant logs DEL failures and reports success. The failed
	// attachments' cache entries are kept, so a retry or GC still has
	// their config.
	Tolerant = netconf.Tolerant
)

// TeardownPolicyKey is the top-level key of a network configuration file
// that overrides the manager's teardown policy for that network, for
// example "ocicni.teardownPolicy": "tolerant".
const TeardownPolicyKey = netconf.TeardownPolicyKey

// Timeouts bound a network's plugin runs for each verb: all the plugins
// of its list, for one ADD, DEL or CHECK of one attachment; zero is no
// bound of its own. [WithNetworkTimeouts] sets the manager's default, and
// a network's config file may set its own with [TimeoutsKey], verb by
// verb. The shorter of the bound and the caller's deadline ends the runs;
// one that the bound ends fails with a [*TimeoutError].
type Timeouts = netconf.Timeouts

// TimeoutsKey is the top-level key of a network configuration file that
// sets the network's [Timeouts], for example
// "ocicni.timeouts": {"add": "30s", "del": "10s", "check": "5s"}: Go
// durations above zero, each verb optional. A file with an invalid value
// is skipped with a [ConfigError] that names it.
const TimeoutsKey = netconf.TimeoutsKey

// MaxConfigFileSize is the largest network configuration file the manager
// reads, and the largest plugin configuration file in a network's
// sub-folder. A larger file is skipped with a [ConfigError] that wraps
// [ErrInvalidConfig] and [ErrFileTooLarge].
const MaxConfigFileSize = netconf.MaxConfigFileSize

// Option configures a [Manager]. Options apply in order, so a later one
// wins. One rule holds for all of them: an empty or nil value means the
// default (WithConfDir(""), WithBinDirs(), WithCacheDir(""),
// WithLogger(nil), WithExec(nil), WithNetNSOps(nil), WithPluginHook(nil),
// a zero field of [HealPolicy]); a value that is present but invalid is
// refused with an error matching [ErrInvalidArgument].
type Option func(*options) error

type options struct {
	confDir         string
	binDirs         []string
	cacheDir        string
	defaultNet      string
	watch           bool
	memory          *netconf.MemorySource // see SetMemorySource; nil: the conf dir's files
	log             *logrus.Entry
	exec            invoke.Exec
	netns           NetNSOps
	policy          TeardownPolicy
	timeouts        Timeouts // every network's, unless its config sets its own
	rollbackTimeout time.Duration
	debounce        time.Duration
	delStopAtCode3  bool    // libcni's list DEL only; see WithDELStopAtUnknownContainer
	argsAsGiven     bool    // see WithArgsAsGiven
	gcScope         gcScope // see WithGCScopedToLoadedNetworks and WithGCAllNetworks
	pluginEnv       []string
	pluginHook      PluginHook
	gcWorkers       int
	heal            HealPolicy
	admission       Admission
	versionWait     time.Duration        // see netconf.Config; tests shorten it
	versionTimeout  time.Duration        // see netconf.Config; tests shorten it
	configGrace     time.Duration        // see savedConfigGrace; tests shorten it
	gatePatience    locks.Patience       // see locks.Gate; tests change it
	gcPace          gcPace               // see gcPacer; tests change it
	tracerProvider  trace.TracerProvider // nil: OpenTelemetry's global one
	meterProvider   metric.MeterProvider // nil: no metrics
	freshWindow     time.Duration        // see freshAdds; 0: a status always runs CHECK
}

func defaultOptions() options {
	return options{
		confDir:         DefaultConfDir,
		binDirs:         []string{DefaultBinDir},
		watch:           true,
		netns:           kernelNetNS{},
		policy:          Strict,
		rollbackTimeout: time.Minute,
		debounce:        100 * time.Millisecond,
		gcWorkers:       defaultGCWorkers(),
		heal:            defaultHealPolicy(),
		admission:       defaultAdmission(),
		versionWait:     netconf.DefaultVersionWait,
		versionTimeout:  netconf.DefaultVersionTimeout,
		configGrace:     savedConfigGrace,
		freshWindow:     defaultFreshWindow,
		gatePatience:    defaultGatePatience,
		gcScope:         gcOwned,
		gcPace:          defaultGCPace,
	}
}

// WithConfDir sets the directory that holds network configuration files
// ([DefaultConfDir] by default).
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
func WithConfDir(dir string) Option {
	return func(o *options) error {
		if dir == "" {
			o.confDir = DefaultConfDir
			return nil
		}
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%w: conf dir %q must be absolute", ErrInvalidArgument, dir)
		}
		o.confDir = filepath.Clean(dir)
		return nil
	}
}

// WithBinDirs sets the directories searched for plugin binaries
// ([DefaultBinDir] by default).
func WithBinDirs(dirs ...string) Option {
	return func(o *options) error {
		if len(dirs) == 0 {
			o.binDirs = []string{DefaultBinDir}
			return nil
		}
		clean := make([]string, 0, len(dirs))
		for _, d := range dirs {
			if !filepath.IsAbs(d) {
				return fmt.Errorf("%w: bin dir %q must be absolute", ErrInvalidArgument, d)
			}
			clean = append(clean, filepath.Clean(d))
		}
		o.binDirs = clean
		return nil
	}
}

// WithCacheDir sets libcni's cache directory (default /var/lib/cni).
//
// The manager reads and writes it only through one store below the
// engine (internal/ledger, on package [cache]): records, saved configs,
// libcni's entries and lock files. A sandbox's change (its next record,
// the entries it drops, the configs it releases) is one commit, whole or
// not at all: the dropped entries wait in <cache dir>/ocicni/aside with
// the record being written, and a commit that a crash cut short is
// finished or undone when its sandbox is next locked, when an engine
// starts, and before GC. Every durable write (a record, a saved config)
// holds a lock on its temporary file until the file has its name, so
// that an engine's start and GC remove the temporary files a crash left,
// and never one that a write in flight, of any process, holds. [cache]
// keeps the order records outside libcni's results directory and, on
// Linux, an index of that directory's names current through inotify
// ([cache.Cache.IndexResults]), so that a full node's teardowns cost what
// an empty node's do.
//
// Every path below it is reached without following a symlink: a
// symlinked ocicni/ or results/ is refused, never written through (see
// [cache.Cache.CheckState]); the cache dir itself may be a symlink.
func WithCacheDir(dir string) Option {
	return func(o *options) error {
		if dir != "" && !filepath.IsAbs(dir) {
			return fmt.Errorf("%w: cache dir %q must be absolute", ErrInvalidArgument, dir)
		}
		o.cacheDir = dir
		return nil
	}
}

// WithDefaultNetwork fixes the default network's name. Without it the
// default is the first valid file in the conf dir, and follows the
// directory as files come and go.
func WithDefaultNetwork(name string) Option {
	return func(o *options) error {
		o.defaultNet = name
		return nil
	}
}

// WithoutWatcher disables the fsnotify watcher. Configuration is then read
// at construction and whenever a requested network is missing.
func WithoutWatcher() Option {
	return func(o *options) error {
		o.watch = false
		return nil
	}
}

// SetMemorySource makes the manager load the config lists held in src
// instead of the conf dir's files, and start no watcher. The go-cni face
// (package gocni) sets it through [netconf.WithMemorySource]; options is
// unexported, so it is not part of the exported API. As for every
// option, nil means the default: the conf dir.
func (o *options) SetMemorySource(src *netconf.MemorySource) {
	o.memory = src
	if src != nil {
		o.watch = false
	}
}

// WithLogger sets the logger (logrus's standard logger by default). The
// manager adds fields such as pod, network, ifname and verb.
func WithLogger(l *logrus.Entry) Option {
	return func(o *options) error {
		o.log = l // nil: New takes the default
		return nil
	}
}

// WithExec replaces the plugin executor, which lets callers fake plugins.
// It is never called with a context that is already done. The default
// executor kills a plugin's whole process group when the context ends (see
// [PluginRun]); a replacement does what it does.
func WithExec(e invoke.Exec) Option {
	return func(o *options) error {
		o.exec = e
		return nil
	}
}

// WithNetNSOps replaces what the manager does inside a pod's network
// namespace without a plugin: set lo up at setup, check it and read
// interface addresses at status (see [NetNSOps]). It is for tests that
// also fake the plugins with [WithExec], and it cannot switch the work
// off by accident: there is no "without" form, and nil means the default,
// the kernel. A replacement that does nothing leaves every pod's lo down.
//
// The netns path of a setup is validated before the replacement is
// called, as always: it must exist and must not be the host's network
// namespace.
func WithNetNSOps(ops NetNSOps) Option {
	return func(o *options) error {
		if ops == nil {
			ops = kernelNetNS{}
		}
		o.netns = ops
		return nil
	}
}

// WithTeardownPolicy sets the default policy for DEL failures. A network
// may override it with [TeardownPolicyKey] in its config file.
func WithTeardownPolicy(p TeardownPolicy) Option {
	return func(o *options) error {
		if !netconf.ValidPolicy(p) {
			return fmt.Errorf("%w: teardown policy %q", ErrInvalidArgument, p)
		}
		o.policy = p
		return nil
	}
}

// WithNetworkTimeouts sets the default [Timeouts] of every network's
// plugin runs; a network's config may set its own with [TimeoutsKey],
// verb by verb. By default there is none: only the caller's deadline
// bounds ADD, DEL and CHECK. A timed-out ADD is rolled back like any
// failed one, and a timed-out DEL is retried in the background (see
// [HealPolicy]) like any failed one.
func WithNetworkTimeouts(t Timeouts) Option {
	return func(o *options) error {
		if err := t.Valid(); err != nil {
			return fmt.Errorf("%w: network timeouts: %w", ErrInvalidArgument, err)
		}
		o.timeouts = t
		return nil
	}
}

// WithRollbackTimeout bounds the DELs that undo a failed setup. They run
// even when the caller's context has expired. The default is one minute.
func WithRollbackTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: rollback timeout %v", ErrInvalidArgument, d)
		}
		o.rollbackTimeout = d
		return nil
	}
}

// WithReloadDebounce sets the watcher's debounce window. The default is
// 100ms. The first change after a quiet window is reloaded at once, and
// the changes that follow in one more reload once they pause for a few
// milliseconds, so a change is usable within milliseconds whatever the
// window; the changes after that are gathered into one more reload, one
// window after the latest of them (but at most a second after the first).
// A burst of writes thus costs two or three reloads. 0 reloads on every
// change.
func WithReloadDebounce(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: debounce %v", ErrInvalidArgument, d)
		}
		o.debounce = d
		return nil
	}
}

// WithDELStopAtUnknownContainer restores libcni's behaviour for a list
// whose DEL meets a plugin that answers code 3 (unknown container): the
// list's DEL stops there, as the spec allows, so the plugins before it in
// the list (an IPAM-holding bridge, say) get no DEL. The attachment still
// counts as [AlreadyGone], and a warning names the network; what those
// plugins hold stays until GC (the plugins' own, at CNI 1.1) collects it.
//
// Without this option the manager then runs DEL for every plugin of the
// list itself, last to first, as single-plugin lists: code 3 from one of
// them does not stop the others and counts as success, so that each
// plugin releases what it holds (DEL is idempotent, so a plugin that
// already got its DEL from the list gets it again harmlessly). Those DELs
// run without prevResult. The attachment is then [Deleted] when every
// plugin's DEL succeeded or answered code 3, and its cache entry is
// removed; otherwise it carries the first other failure, and its cache
// entry is kept for a retry.
func WithDELStopAtUnknownContainer() Option {
	return func(o *options) error {
		o.delStopAtCode3 = true
		return nil
	}
}

// WithArgsAsGiven makes the manager pass in CNI_ARGS only what the pod
// gives: the static IP and MAC of [RuntimeConfig] when set, then its
// ExtraArgs, in their order. Without it, the manager sets IgnoreUnknown,
// K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID and
// K8S_POD_UID first, as cri-o/ocicni does, passes on the pairs of its own
// process's CNI_ARGS environment variable, and drops ExtraArgs named IP
// or MAC. The go-cni face (package gocni) uses it: go-cni sends only the
// caller's arguments.
func WithArgsAsGiven() Option {
	return func(o *options) error {
		o.argsAsGiven = true
		return nil
	}
}

// WithHealing tunes healing: a DEL that failed during a teardown, a
// rollback or GC is retried in the background, with capped exponential
// backoff and jitter, until it succeeds or its plugin answers code 3, so
// that the teardown finishes even when the runtime never calls again.
// Zero fields of p take their defaults (see [HealPolicy]); negative
// durations or concurrency are refused.
func WithHealing(p HealPolicy) Option {
	return func(o *options) error {
		if p.Initial < 0 || p.Max < 0 || p.Horizon < 0 || p.Timeout < 0 || p.StartDelay < 0 || p.Concurrency < 0 || p.SetupConcurrency < 0 {
			return fmt.Errorf("%w: negative heal policy field in %+v", ErrInvalidArgument, p)
		}
		if p.Max > 0 && p.Initial > p.Max {
			return fmt.Errorf("%w: heal policy: Initial %v above Max %v", ErrInvalidArgument, p.Initial, p.Max)
		}
		o.heal = p.withDefaults()
		return nil
	}
}

// WithoutHealing turns the background retries off (see [WithHealing]).
// Failed DELs stay recorded, with their retry state, for the runtime's
// next teardown, for GC, and for the next manager started with healing on
// the same cache dir, which resumes them. Short-lived tools that share a
// cache dir with a runtime's manager use it.
func WithoutHealing() Option {
	return func(o *options) error {
		o.heal.Disabled = true
		return nil
	}
}
