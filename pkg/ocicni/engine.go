package ocicni

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// engine is what the parts of a Manager share: the options its own
// services read (each part gets those it reads as data of its own); the
// store of what each sandbox holds; the plugin runner; the locks; the
// loaded networks; telemetry. Its methods are the services every part
// uses: the network set, a pod's locks (locks.go), a DEL's plan
// (plan.go), an operation's span (telemetry.go).
type engine struct {
	opts  engineOptions
	log   *logrus.Entry
	exec  invoke.Exec
	cni   *cniRunner
	store *sandboxStore // the inventory and the records: see inventory.go
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

	fresh     *freshAdds     // the attachments added a moment ago, for status (see freshAdds)
	healer    *healer        // background DEL retries; its loop is counted in Manager.wg
	rollbacks bgwork.Tracker // background rollbacks (see SetupError)
}

// engineOptions are the options the engine's services read.
type engineOptions struct {
	argsAsGiven  bool           // a plan's runtime config: see WithArgsAsGiven
	timeouts     Timeouts       // a plan's timeouts, unless its network's config sets its own
	gatePatience locks.Patience // how long GC holds new pods back (see lockNode)
	confDir      string         // where the networks come from, for errors
	fromMemory   bool           // they come from memory instead (see SetMemorySource)
}

// networkSet and network are the loaded configuration, as package netconf
// publishes it: an immutable snapshot of the networks, and one network.
type (
	networkSet = netconf.Set
	network    = netconf.Network
)

// snapshot returns the current network set.
func (e *engine) snapshot() *networkSet { return e.conf.Snapshot() }

// lookup finds a network by name in set; when it is missing, it waits,
// within ctx, for a load that may bring it (see netconf.Loader.Lookup).
func (e *engine) lookup(ctx context.Context, set *networkSet, name string) (*network, *networkSet, error) {
	return e.conf.Lookup(ctx, set, name)
}

// explainDefault turns a missing default network into an error that says
// where configs were looked for and why files were skipped.
func (e *engine) explainDefault(err error, set *networkSet) error {
	if !errors.Is(err, ErrNoDefaultNetwork) {
		return err
	}
	return e.noDefaultError(set)
}

func (e *engine) noDefaultError(set *networkSet) error {
	if set.DefaultName() != "" {
		return fmt.Errorf("%w: %w", ErrNoDefaultNetwork, set.NotFound(set.DefaultName()))
	}
	err := fmt.Errorf("%w: no valid CNI configuration in %s. Has your network provider started?",
		ErrNoDefaultNetwork, e.opts.confDir)
	errs := []error{err}
	for _, sk := range set.Skipped() {
		errs = append(errs, sk)
	}
	return errors.Join(errs...)
}

// gauges are what the manager's gauges read.
func (e *engine) gauges() telemetry.Gauges {
	return telemetry.Gauges{
		Pending: e.healer.pendingStats,
		Skipped: func() map[string]int {
			out := map[string]int{}
			for _, sk := range e.snapshot().Skipped() {
				out[netconf.SkipReason(sk.Err)]++
			}
			return out
		},
		Degraded: func() map[string]bool {
			h := e.health()
			return map[string]bool{telemetry.DegradedLocks: h.LocksDegraded, telemetry.DegradedWatcher: h.WatcherPolling}
		},
	}
}
