package ocicni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// collector is GC (gc.go, gcplan.go, gcdel.go, gcpace.go).
type collector struct {
	*engine
	opts   gcOptions
	detach deleter // runs the stale attachments' DELs
}

// gcOptions are the options GC reads.
type gcOptions struct {
	binDirs     []string      // where the GC verb finds its plugins
	gcScope     gcScope       // see WithGCScopedToLoadedNetworks and WithGCAllNetworks
	configGrace time.Duration // see savedConfigGrace
	gcPace      gcPace        // see gcPacer
	gcWorkers   int           // see WithGCWorkers
}

// run is [Manager.GCOutcomes]: see there.
func (c *collector) run(ctx context.Context, validPods []*PodNetwork) (_ []Outcome, err error) {
	ctx, span := c.startOp(ctx, opGC, nil)
	defer func() { span.End(ctx, telemetry.OutcomeOf(err), err) }()
	if err := ctx.Err(); err != nil {
		c.tel.GCRan(ctx, telemetry.OutcomeOf(err), 0, 0, 0)
		return nil, fmt.Errorf("ocicni: GC: %w", err)
	}
	log := c.log.WithField("verb", "GC")
	set := c.snapshot()
	watch := c.setups.watch() // before planning reads anything
	defer watch.stop()

	g, errs := c.planGC(validPods, set, watch, log)
	log.WithFields(logrus.Fields{"staleSandboxes": len(g.stale), "validPods": len(g.validIDs)}).
		Info("GC deletes stale attachments and leaves those of valid pods untouched")
	outcomes, derrs := c.deleteStale(ctx, verbsReserved(ctx, time.Now(), len(gcTargets(set)) > 0), g.stale, watch, log)
	errs = append(errs, derrs...)
	errs = append(errs, c.gcVerbsExclusive(ctx, set, g, watch)...)
	outcomes, err = slices.Concat(g.unplanned, outcomes), errors.Join(errs...)
	failed := 0
	for _, o := range outcomes {
		if o.Failure() {
			failed++
		}
	}
	c.tel.GCRan(ctx, telemetry.OutcomeOf(err), len(outcomes)-failed, len(g.valid.seen), failed)
	return outcomes, err
}

// gcVerbReserveMax bounds the part of a GC call's deadline that its
// stale DELs leave to its GC verbs (see verbsReserved).
const gcVerbReserveMax = 10 * time.Second

// errGCVerbReserve is the cause of a stale DEL that GC cut short, or did
// not start, to keep the rest of its deadline for its GC verbs.
var errGCVerbReserve = fmt.Errorf("ocicni: GC kept the rest of its deadline for its GC verbs; the next GC deletes this: %w",
	context.DeadlineExceeded)

// verbsReserved returns when GC, starting at now under ctx, stops its
// stale DELs so that its GC verbs (when there are any, verbs) still get
// their turn before ctx's deadline, however many stale sandboxes there
// are and however busy the node is: a quarter of the time left, at most
// gcVerbReserveMax, is kept for them. Zero: no deadline to keep.
func verbsReserved(ctx context.Context, now time.Time, verbs bool) time.Time {
	dl, ok := ctx.Deadline()
	if !ok || !verbs {
		return time.Time{}
	}
	return dl.Add(-min(dl.Sub(now)/4, gcVerbReserveMax))
}

// gcVerbsBound bounds the GC verbs of one GC call, on top of the
// caller's context. They run with the gate held exclusively, so this is
// the longest a pod operation waits for them. The networks not reached
// within it get [ErrGCVerbsSkipped]; the next GC sends them the verb.
const gcVerbsBound = 10 * time.Second

// errGCVerbsBound is the cause of a GC verb cut short by gcVerbsBound.
var errGCVerbsBound = fmt.Errorf("ocicni: GC verbs ran past their %v bound: %w", gcVerbsBound, context.DeadlineExceeded)

// gcVerbsExclusive takes the gate exclusively and sends the GC verbs, with
// the valid attachments of the plan and those of every setup that watch
// saw. Without a network to send GC to it takes no lock. While GC waits
// for the gate, new pod operations are held back only within the gate's
// bounds (see gate); when ctx ends first, every target network gets
// [ErrGCVerbsSkipped].
func (c *collector) gcVerbsExclusive(ctx context.Context, set *networkSet, g *gcPlan, watch *setupWatch) []error {
	targets := gcTargets(set)
	if len(targets) == 0 {
		return nil
	}
	unlock, err := c.lockNode(ctx)
	if err != nil {
		return skippedVerbs(targets, err)
	}
	defer unlock()
	c.protectSetups(g, watch, set)
	if err := c.protectOthersWork(g, watch, set); err != nil {
		return skippedVerbs(targets, fmt.Errorf("telling which sandboxes other engines worked on: %w", err))
	}
	return c.sendGCVerbs(ctx, gcVerbsBound, set, targets, g.valid)
}

// sendGCVerbs sends GC to each target network in turn, within bound. The
// networks it does not reach in time get [ErrGCVerbsSkipped].
func (c *collector) sendGCVerbs(ctx context.Context, bound time.Duration, set *networkSet, targets []string, valid *validSet) []error {
	vctx, cancel := context.WithTimeoutCause(withReason(ctx, reasonGC), bound, errGCVerbsBound)
	defer cancel()
	var errs []error
	for i, name := range targets {
		if vctx.Err() != nil {
			return append(errs, skippedVerbs(targets[i:], context.Cause(vctx))...)
		}
		va := valid.byNet[name]
		if va == nil {
			va = []types.GCAttachment{} // never nil: libcni reads nil as "delete everything"
		}
		err := c.gcVerb(vctx, set.Network(name).List, va)
		if err != nil && vctx.Err() != nil {
			// The plugin's error does not say that it was killed, or why.
			err = fmt.Errorf("%w (cut short: %w)", err, context.Cause(vctx))
		}
		if err != nil {
			errs = append(errs, &NetworkError{Network: name, Verb: "GC", Err: err})
		}
	}
	return errs
}

// skippedVerbs returns, for each of networks, a GC *NetworkError that
// matches ErrGCVerbsSkipped and wraps why.
func skippedVerbs(networks []string, why error) []error {
	errs := make([]error, 0, len(networks))
	for _, name := range networks {
		errs = append(errs, &NetworkError{Network: name, Verb: "GC", Err: fmt.Errorf("%w: %w", ErrGCVerbsSkipped, why)})
	}
	return errs
}

// gcTargets returns the names of the loaded networks, sorted, that get
// the GC verb: those at CNI 1.1.0 or later that do not set disableGC.
func gcTargets(set *networkSet) []string {
	var out []string
	for name, n := range set.All() {
		if n.List.DisableGC {
			continue
		}
		if ok, _ := version.GreaterThanOrEqualTo(n.List.CNIVersion, "1.1.0"); ok {
			out = append(out, name)
		}
	}
	return out
}

// protectOthersWork adds to the valid attachments everything of the
// sandboxes that other engines worked on lately (see
// [engine.othersWorkedOn]): GC's valid pods may not know of them yet.
// The caller holds the node gate exclusively, so no other engine's setup
// is in flight. When the lock files cannot be listed it returns why, and
// the verbs wait for the next GC.
func (c *collector) protectOthersWork(g *gcPlan, watch *setupWatch, set *networkSet) error {
	recent, err := c.store.led.RecentWork(watch.began.Add(-othersWorkGrace))
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(recent)) {
		if c.othersWorkedOn(recent[id], watch) {
			g.valid.addAll(id, c.store.takeInventory(id, nil, set, c.log.WithField("sandbox", id)))
		}
	}
	return nil
}

// protectSetups adds to the valid attachments everything of the sandboxes
// whose setup overlapped GC (see [sandboxStore.setupInventory]). The caller
// holds the gate exclusively, so no setup is in flight.
func (c *collector) protectSetups(g *gcPlan, watch *setupWatch, set *networkSet) {
	seen := watch.attachments()
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		g.valid.addAll(id, c.store.setupInventory(id, g.byID[id], g.recs.ByID[id], seen[id], set))
	}
}

// gcVerb sends GC to every plugin of the list with the valid attachments.
func (c *collector) gcVerb(ctx context.Context, list *libcni.NetworkConfigList, valid []types.GCAttachment) error {
	inject := map[string]interface{}{
		"name":                      list.Name,
		"cniVersion":                list.CNIVersion,
		"cni.dev/valid-attachments": valid,
		"cni.dev/attachments":       valid, // the name an earlier spec draft used
	}
	var errs []error
	for _, p := range list.Plugins {
		conf, err := guard.Value("libcni InjectConf", "", func() (*libcni.PluginConfig, error) { return libcni.InjectConf(p, inject) })
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
			continue
		}
		path, err := c.exec.FindInPath(p.Network.Type, c.opts.binDirs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args := &invoke.Args{Command: "GC", Path: joinPath(c.opts.binDirs)}
		if err := guard.Do("libcni GC", "", func() error {
			return invoke.ExecPluginWithoutResult(ctx, path, conf.Bytes, args, c.exec)
		}); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
		}
	}
	return errors.Join(errs...)
}

// joinPath joins bin dirs into a CNI_PATH value.
func joinPath(dirs []string) string { return strings.Join(dirs, string(os.PathListSeparator)) }

// defaultGCWorkers is how many stale sandboxes [Manager.GC] deletes in
// parallel unless [WithGCWorkers] says otherwise: one per CPU the process
// may use, at least 2 and at most 8. A stale DEL is mostly plugin start-up
// (three Go binaries for bridge, host-local and portmap), so it is bound by
// CPU: more workers shorten GC until the CPUs are busy (see BENCHMARKS.md,
// "Figures behind design choices"). DELs of one network also queue on
// IPAM locks such as host-local's, so more workers than CPUs buy little.
// The default favours a GC that ends within a runtime's deadline (CRI-O
// gives it 30 s).
func defaultGCWorkers() int { return min(max(runtime.GOMAXPROCS(0), 2), 8) }

// WithGCWorkers sets how many stale sandboxes [Manager.GC] deletes in
// parallel, n >= 1. The DELs of one sandbox always run one after the
// other, as the spec requires. The default is one per CPU that the
// process may use (GOMAXPROCS), at least 2 and at most 8. While pods are
// being set up, GC deletes one sandbox at a time whatever n is (see
// [Manager.GCOutcomes]).
func WithGCWorkers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: GC workers %d, want at least 1", ErrInvalidArgument, n)
		}
		o.gcWorkers = n
		return nil
	}
}

// WithGCScopedToLoadedNetworks limits what [Manager.GC] deletes to the
// attachments of the networks loaded when GC runs, as libcni's
// GCNetworkList limits itself to one network's. Of a sandbox that no
// valid pod owns, GC runs DEL only for the attachments of loaded
// networks: its cache entries, its corrupt cache files whose names name a
// loaded network, and the attachments only its order record names. Its
// record keeps the other lines. Everything else is left as it is, and GC
// reports none of it as a failure: the cache entries, corrupt files and
// record lines of other networks, the corrupt files that name no network,
// an order record that cannot be read, and the saved-config links of a
// sandbox without a record (their network is not told without reading
// them). GC still removes the saved configs that no record uses once they
// are old (see [SandboxInventory]). The network
// is told by name: a network of the same name that another runtime loads
// is in scope too.
//
// By default GC collects what this library owns (see
// [Manager.GCOutcomes]): this option also leaves the attachments that the
// order records name of networks removed since. The go-cni face (package
// gocni) uses it: its GC collects only the networks it loaded. Of this
// option and [WithGCAllNetworks], the last one given wins, so that a
// caller's option overrides one a face gives first.
func WithGCScopedToLoadedNetworks() Option {
	return func(o *options) error {
		o.gcScope = gcLoaded
		return nil
	}
}

// WithGCAllNetworks makes [Manager.GC] collect every stale attachment in
// the cache dir, whichever runtime made it, as the default did before:
// besides what this library owns (see [Manager.GCOutcomes]),
// the cache entries of networks that are not loaded and that no order
// record names, deleted with their cached config, and the corrupt cache
// files that name no network, reported as failures. It suits a runtime
// that alone uses its cache dir: on a cache dir that other runtimes share
// (the default one, /var/lib/cni), GC deletes their sandboxes' attachments
// too, with their addresses and IPAM reservations. Of this option and
// [WithGCScopedToLoadedNetworks], the last one given wins.
func WithGCAllNetworks() Option {
	return func(o *options) error {
		o.gcScope = gcAll
		return nil
	}
}
