package ocicni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/internal/ledger"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// managedExec is the executor every plugin run of the manager goes
// through, around the configured invoke.Exec. It does what the manager
// adds to a plugin run, in this order:
//   - a context that is already done starts no plugin;
//   - the environment of [WithPluginEnv] is appended;
//   - background DELs are marked to run at the lowest CPU priority (see
//     inBackground);
//   - failures libcni reports as plain text become typed: a binary missing
//     from every bin dir wraps ErrPluginNotFound, and a plugin killed by an
//     expired context wraps the context's error next to its own;
//   - every run gets a span, a child of the context's, under which the
//     plugin runs (so its TRACEPARENT is the span's), and its duration is
//     recorded (see [WithMeterProvider]);
//   - every run is reported to the hook of [WithPluginHook], with the
//     reason the context carries (see withReason);
//   - a setup's first ADD waits for its gate (see [attacher.attach]): the default
//     executor starts the plugin and holds back its stdin, any other is
//     called once the gate is open.
type managedExec struct {
	inner invoke.Exec
	env   []string   // "KEY=VALUE" pairs appended to every plugin's environment
	hook  PluginHook // nil: none
	tel   *telemetry.Recorder
	home  *os.File // the network namespace every plugin starts in; nil: the calling thread's (see New)
}

var _ invoke.Exec = managedExec{}

func (e managedExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if len(e.env) > 0 {
		environ = append(append(make([]string, 0, len(environ)+len(e.env)), environ...), e.env...)
	}
	gate := pluginexec.GateOf(ctx)
	if gate != nil && !pluginexec.GatesStdin(e.inner) {
		if err := gate.Wait(ctx); err != nil {
			return nil, err // no plugin ran
		}
		gate = nil
	}
	network, known := ctx.Value(networkKey{}).(string)
	run := pluginRun(pluginPath, stdinData, !known, environ, 0, nil)
	if known {
		run.Network = network
	}
	run.Reason, _ = ctx.Value(reasonKey{}).(string)
	rctx, span := e.tel.StartPlugin(ctx, telemetry.Plugin{
		Verb: run.Verb, Network: run.Network, Type: run.Plugin, Reason: run.Reason,
		ContainerID: run.ContainerID, IfName: run.IfName,
	})
	var output *pluginexec.Output
	if e.hook != nil {
		output = &pluginexec.Output{}
		rctx = pluginexec.WithOutput(rctx, output)
	}
	start := time.Now()
	out, err := e.run(rctx, pluginPath, stdinData, environ)
	run.Duration, run.Err = time.Since(start), err
	if gate != nil {
		if gerr := gate.Wait(ctx); gerr != nil { // killed before it read its config: not a run
			span.End(ctx, run.Duration, telemetry.OutcomeOf(gerr), 0, gerr)
			return out, err
		}
	}
	span.End(ctx, run.Duration, telemetry.OutcomeOf(err), errorCode(err), err)
	if e.hook != nil {
		run.Stdout, run.Stderr = output.Stdout, output.Stderr
		e.hook(ctx, run)
	}
	return out, err
}

func (e managedExec) run(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, pluginexec.NotStarted(ctxErr(ctx), pluginPath)
	}
	ictx := pluginexec.WithNetNS(ctx, e.home)
	if inBackground(ctx, environ) {
		ictx = pluginexec.WithLowPriority(ictx)
	}
	out, err := e.inner.ExecPlugin(ictx, pluginPath, stdinData, environ)
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("%w: %w", ctxErr(ctx), err)
	}
	return out, err
}

// ctxErr is the error of ctx, which has ended: its cause when that says
// more and still matches the context's error (a network's timeout, see
// bounded; GC's reserve for its verbs), else ctx.Err(). (Not
// context.Cause alone: a caller's own cause need not match
// context.Canceled or context.DeadlineExceeded, which mark a DEL to
// retry.)
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ctx.Err()) {
		return cause
	}
	return ctx.Err()
}

// planRun returns the context of the plugin runs of p's verb ("ADD",
// "DEL" or "CHECK"), run for why (see [PluginRun].Reason). It carries
// why, and the name of the network whose list they belong to, which
// libcni sets as every plugin's "name", so that the hook reports it
// without decoding the plugin's stdin; and it is bounded by the network's
// timeout for verb (see [Timeouts]; 0: none), the shorter of it and ctx's
// own deadline. A plugin run that the bound ends fails with a
// *TimeoutError (see run).
func planRun(ctx context.Context, p *plan, verb, why string) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(withReason(ctx, why), networkKey{}, p.list.Name)
	var d time.Duration
	switch verb {
	case "ADD":
		d = p.timeouts.Add
	case "DEL":
		d = p.timeouts.Del
	case "CHECK":
		d = p.timeouts.Check
	}
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, d, &TimeoutError{Network: p.Name, Verb: verb, Timeout: d})
}

// PluginRun describes one plugin run, as reported to a [PluginHook].
//
// Unless [WithExec] replaces the executor, plugins run as libcni runs them
// (same stdin, environment and stderr, and a plugin's JSON error on stdout
// becomes a *types.Error), except that on Unix each plugin leads a process
// group of its own. When the context ends before the plugin exits, the
// plugin and every process it started in its group get SIGKILL, and the
// error matches the context's error with errors.Is while errors.As still
// reaches the plugin's *types.Error. A process that left the group
// survives. A plugin that exits on its own has nothing killed, so a daemon
// it started keeps running. Whatever process outlives the plugin, the call
// returns at most two seconds after the plugin ended, even if that process
// holds the plugin's stdout or stderr open. Off Unix the executor is
// invoke.RawExec, which kills the plugin alone. A context that is already
// done starts no plugin, whatever the executor. The default executor keeps
// at most [MaxPluginStdout] and [MaxPluginStderr] of a plugin's output, in
// memory that cannot grow past them: a plugin that prints more is killed
// with its group ([PluginOutputLimitError]). Errors quote at most
// [PluginOutputQuoteLimit] bytes of it; a [PluginHook] gets all of it. On
// Unix, background DELs (GC's, healing's) run at nice 19, and on Linux at
// SCHED_IDLE in every thread, leaving the CPU to the pods being set up;
// the GC verbs, which pod operations wait for, do not. While pods are set
// up, GC paces its DELs instead, at the normal priority (see [Manager.GCOutcomes]): at the lowest, beside setups that keep the CPUs busy, a DEL waits
// for an idle moment that seldom comes, holding the kernel's network locks
// the setups then wait for.
//
// A network's plugin runs for one verb may have a bound of their own
// ([Timeouts]): the top-level key [TimeoutsKey] of its config file, for
// example "ocicni.timeouts": {"add": "30s", "del": "10s", "check": "5s"},
// or [WithNetworkTimeouts] for every network that does not set the verb
// itself. The bound covers all the plugins of the list for one attachment,
// and the shorter of it and the caller's deadline applies. Runs that the
// bound ends fail with a [*TimeoutError] (which matches
// context.DeadlineExceeded): a timed-out ADD is rolled back like any
// failed one, a timed-out DEL is [RetryLater] and healing retries it, a
// timed-out CHECK fails the status. The bound travels with the config: a
// teardown from the config cached at ADD uses that config's key. A value
// that is not a Go duration above zero, or an unknown verb, skips the file
// with a [ConfigError].
type PluginRun struct {
	Verb        string // CNI_COMMAND: ADD, DEL, CHECK, GC, STATUS or VERSION
	Network     string // the "name" of the config the plugin received; "" for VERSION
	Plugin      string // the binary's base name, which is the plugin type
	ContainerID string // CNI_CONTAINERID; "" for verbs without a container
	IfName      string // CNI_IFNAME
	Duration    time.Duration
	Err         error // as returned to libcni: typed, see the package doc
	// Reason is why the manager ran the plugin: "setup", "status",
	// "teardown", "rollback", "gc", or "heal" for a background retry of a
	// failed DEL (see [HealPolicy]); "" for VERSION and STATUS.
	Reason string
	// Stdout and Stderr are all the plugin printed, up to [MaxPluginStdout]
	// and [MaxPluginStderr], which Err quotes only the start of; after an
	// [ErrPluginOutputLimit] they are empty. Only the default executor
	// fills them (not one of [WithExec]). They are valid until the hook
	// returns.
	Stdout, Stderr []byte
}

// Reasons for plugin runs, as [PluginRun.Reason] reports them.
const (
	reasonSetup    = "setup"
	reasonStatus   = "status"
	reasonTeardown = "teardown"
	reasonRollback = "rollback"
	reasonGC       = "gc"
	reasonHeal     = "heal"
)

type reasonKey struct{}

// inBackground reports whether a plugin run under ctx with environ is a
// background DEL: GC's DELs of stale attachments and healing's retries.
// The default executor runs those at the lowest CPU priority (see
// pluginexec.WithLowPriority): plugin runs are CPU-bound process starts,
// so without it GC takes CPU from the pods being set up meanwhile. The GC
// verbs keep the normal priority: pod operations wait for them; so do
// GC's paced DELs beside setups, which its rests throttle (see paced).
func inBackground(ctx context.Context, environ []string) bool {
	why, _ := ctx.Value(reasonKey{}).(string)
	return (why == reasonGC || why == reasonHeal) && !paced(ctx) && slices.Contains(environ, "CNI_COMMAND=DEL")
}

// withReason returns ctx carrying why the plugins run under it are run.
func withReason(ctx context.Context, why string) context.Context {
	return context.WithValue(ctx, reasonKey{}, why)
}

type networkKey struct{} // see planRun

// PluginHook is called after every plugin run, on the goroutine that ran
// it, with the context the plugin ran under (which carries the caller's
// trace context). It lets a runtime export metrics or spans without this
// module depending on a metrics or tracing library. It must be safe for
// concurrent use and must not block.
type PluginHook func(ctx context.Context, run PluginRun)

// pluginRun describes a plugin run for the hook. The network is read from
// the config on stdin when decode is set.
func pluginRun(pluginPath string, stdin []byte, decode bool, environ []string, d time.Duration, err error) PluginRun {
	r := PluginRun{Plugin: filepath.Base(pluginPath), Duration: d, Err: err}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CNI_COMMAND":
			r.Verb = v
		case "CNI_CONTAINERID":
			r.ContainerID = v
		case "CNI_IFNAME":
			r.IfName = v
		}
	}
	if !decode {
		return r
	}
	var conf struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(stdin, &conf) == nil { // VERSION's stdin has no name
		r.Network = conf.Name
	}
	return r
}

func (e managedExec) FindInPath(plugin string, paths []string) (string, error) {
	p, err := e.inner.FindInPath(plugin, paths)
	if err != nil {
		return "", fmt.Errorf("%w: %q in %v: %w", ErrPluginNotFound, plugin, paths, err)
	}
	return p, nil
}

func (e managedExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return e.inner.Decode(jsonBytes)
}

// cniRunner is the engine's one door to libcni's verbs. Every call is
// behind a recover (see [guard]): a panic inside libcni, such as its
// result converters dereferencing a null in a cache file, becomes a
// *[PanicError] naming the cache entry the call may have read, instead of
// the host process's crash.
//
// withCache reads and writes libcni's cache dir; noCache points libcni at
// a dir that never exists, for the DELs of attachments whose cache entry
// the inventory did not accept (see [plan.cacheEntry]).
type cniRunner struct {
	withCache, noCache *libcni.CNIConfig
}

func newCNIRunner(binDirs []string, led *ledger.Ledger, exec invoke.Exec) *cniRunner {
	return &cniRunner{
		withCache: libcni.NewCNIConfigWithCacheDir(binDirs, led.Dir(), exec),
		noCache:   libcni.NewCNIConfigWithCacheDir(binDirs, filepath.Join(led.Dir(), "ocicni", "no-cache"), exec),
	}
}

func (c *cniRunner) add(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	return guard.Value("libcni ADD", "", func() (types.Result, error) { return c.withCache.AddNetworkList(ctx, list, rt) })
}

// del runs the list's DEL. With entry, the cache entry of rt on list
// that the inventory accepted (see [plan.cacheEntry]), libcni reads its
// result as prevResult and removes it on success, and a panic names it;
// with "" libcni is kept away from the cache.
func (c *cniRunner) del(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf, entry string) error {
	if entry == "" {
		return guard.Do("libcni DEL", "", func() error { return c.noCache.DelNetworkList(ctx, list, rt) })
	}
	return guard.Do("libcni DEL", entry, func() error { return c.withCache.DelNetworkList(ctx, list, rt) })
}

// check runs the list's CHECK, which reads entry, the cache entry of rt
// on list that the inventory accepted, as prevResult.
func (c *cniRunner) check(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf, entry string) error {
	return guard.Do("libcni CHECK", entry, func() error { return c.withCache.CheckNetworkList(ctx, list, rt) })
}

func (c *cniRunner) status(ctx context.Context, list *libcni.NetworkConfigList) error {
	return guard.Do("libcni STATUS", "", func() error { return c.withCache.GetStatusNetworkList(ctx, list) })
}

// WithPluginEnv adds "KEY=VALUE" pairs to the environment of every plugin
// run, after the CNI variables. On hosts with many cores, Go plugins spend
// most of their start-up in the Go runtime (containerd has seen seconds
// per sandbox on large NUMA hosts); WithPluginEnv("GOMAXPROCS=2") bounds
// that. Keys starting with CNI_ are refused: they belong to the spec.
func WithPluginEnv(env ...string) Option {
	return func(o *options) error {
		for _, kv := range env {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.HasPrefix(k, "CNI_") || strings.ContainsAny(kv, "\x00\n") {
				return fmt.Errorf("%w: plugin environment %q must be KEY=VALUE, without CNI_ keys", ErrInvalidArgument, kv)
			}
		}
		o.pluginEnv = append(o.pluginEnv, env...)
		return nil
	}
}
