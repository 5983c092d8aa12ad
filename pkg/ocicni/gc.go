package ocicni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"
)

// GC deletes every attachment that does not belong to a pod in validPods,
// then sends the GC verb with the valid attachments to every loaded network
// at CNI 1.1.0 or later that does not set disableGC. It continues past
// every error and returns them joined. It is [Manager.GCOutcomes] without
// the outcomes; see there for what it deletes, and how it runs beside pod
// operations.
func (m *Manager) GC(ctx context.Context, validPods []*PodNetwork) error {
	_, err := m.GCOutcomes(ctx, validPods)
	return err
}

// GCOutcomes deletes every attachment that does not belong to a pod in
// validPods, then sends the GC verb with the valid attachments to every
// loaded network at CNI 1.1.0 or later that does not set disableGC.
//
//   - Stale cache entries get DEL with their cached config, so attachments
//     of networks whose file was removed are collected too.
//   - Corrupt cache entries get DEL with the loaded config of their network,
//     where there is one, and are then removed.
//   - Attachments recorded at ADD but never cached (a failed setup whose
//     rollback failed, or a crash during ADD) get DEL with the loaded
//     config. Without one they are reported as [Orphaned] and stay
//     recorded for the next GC.
//   - A valid pod's attachments are the union of the networks it names,
//     its cache entries, its order record and, when it names none, the
//     default network on eth0, so a pod never loses an attachment on a
//     network that is no longer the default.
//
// It returns the outcome of every stale attachment GC acted on or could
// not act on, and continues past every error. First come the corrupt
// cache files that name no container GC could tell (Failed, with what
// their name says). Then, for each stale container in the order planned,
// the attachments no DEL can act on (a corrupt cache entry without a
// config to delete it with, or one that cannot be planned: Failed), and
// then its DELs in the order they ran (Deleted, AlreadyGone, RetryLater,
// Failed, Orphaned or NoConfig; RetryLater with ctx's error for each when
// ctx ended before GC held the container's lock). An outcome is a
// failure exactly when [Outcome.Failure] says so: GC applies no
// [TeardownPolicy], so none is Tolerated. Left out are the attachments
// of valid pods, those a teardown deleted after GC planned (the teardown
// reports them), and those of a sandbox whose setup began while GC ran
// (see below): GC did not act on them.
//
// The error joins every failure, each naming its network: the failed
// outcomes' as *[NetworkError]s, and those with no outcome (a cache that
// cannot be listed, a bad valid pod, the GC verbs). It never modifies
// validPods.
//
// GC never stalls pod operations for longer than one DEL of one container
// or the GC verbs themselves, which run for at most 10 s. It runs in three
// phases:
//
//  1. Planning takes no lock. It lists the cache and reads the order
//     records once, and plans the DELs.
//  2. The stale containers' DELs run on [WithGCWorkers] workers, one
//     container per worker at a time. While pods are being set up (a
//     setup in flight, or one begun within the last 250 ms), GC gives way
//     to them: one worker deletes at a time, and rests three times as
//     long as its container's DELs took before the next, unless that
//     would let the DELs left run past ctx's deadline. Plugin runs are
//     CPU-bound, and on a small node even those at the lowest priority
//     slow the setups beside them. For each container a worker takes
//     the gate shared and then the container's lock, exactly as a pod
//     operation does, so other pods wait for nothing and the container's
//     own teardown waits for at most its DELs. Under the lock it skips
//     what a concurrent teardown already deleted (neither the cache file
//     it planned from nor the attachment's line in the order record is
//     left), and it prunes the order record as read under the lock.
//  3. The GC verbs run with the gate held exclusively, and no other lock,
//     so no ADD or DEL runs meanwhile. GC takes the gate at a moment when
//     no pod operation is in flight. While it waits it lets new ones in;
//     on a node that has no such moment within a second, it holds new
//     ones back for at most 200 ms at a time, so that those in flight
//     finish and it gets in. If ctx ends first (pod operations in flight
//     that outlast every hold), or the verbs use up their 10 s, each
//     network not sent the verb
//     gets a *[NetworkError] matching [ErrGCVerbsSkipped] and the
//     context's error (context.DeadlineExceeded for the 10 s); the next
//     GC sends it.
//
// Pods that are set up while GC runs may be missing from validPods, and
// planning saw them half set up. From before planning until GC returns,
// GC therefore watches setups: a setup registers once it holds its
// sandbox's lock, before it runs any plugin. GC deletes nothing of a
// sandbox whose setup was in flight when GC began or began since (checked
// again under the sandbox's lock, so a setup that begins later runs after
// GC's DELs of that sandbox, not during them), and it adds such sandboxes'
// attachments (the ones their setup asked for, their cache entries and
// their order records) to the valid attachments of the GC verbs. As the
// exclusive gate waits for every setup in flight, a plugin's GC never
// sees a half-set-up pod, and never releases what such a pod holds.
func (m *Manager) GCOutcomes(ctx context.Context, validPods []*PodNetwork) ([]Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ocicni: GC: %w", err)
	}
	log := m.log.WithField("verb", "GC")
	set := m.snapshot()
	watch := m.setups.watch() // before planning reads anything
	defer watch.stop()

	g, errs := m.planGC(validPods, set, watch, log)
	log.WithFields(logrus.Fields{"staleSandboxes": len(g.stale), "validPods": len(g.validIDs)}).
		Info("GC deletes stale attachments and leaves those of valid pods untouched")
	outcomes, derrs := m.deleteStale(ctx, g.stale, watch, log)
	errs = append(errs, derrs...)
	errs = append(errs, m.gcVerbsExclusive(ctx, set, g, watch)...)
	return slices.Concat(g.unplanned, outcomes), errors.Join(errs...)
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
// saw. Without a network to send GC to it takes no lock. The gate never
// holds back new pod operations while GC waits for it (see gate); when ctx
// ends first, every target network gets [ErrGCVerbsSkipped].
func (m *Manager) gcVerbsExclusive(ctx context.Context, set *networkSet, g *gcPlan, watch *setupWatch) []error {
	targets := gcTargets(set)
	if len(targets) == 0 {
		return nil
	}
	if err := m.gate.Lock(ctx); err != nil {
		return skippedVerbs(targets, fmt.Errorf("waiting for the pod operations in flight: %w", err))
	}
	defer m.gate.Unlock()
	m.protectSetups(g, watch, set)
	return m.sendGCVerbs(ctx, gcVerbsBound, set, targets, g.valid)
}

// sendGCVerbs sends GC to each target network in turn, within bound. The
// networks it does not reach in time get [ErrGCVerbsSkipped].
func (m *Manager) sendGCVerbs(ctx context.Context, bound time.Duration, set *networkSet, targets []string, valid *validSet) []error {
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
		err := m.gcVerb(vctx, set.Network(name).List, va)
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

// protectSetups adds to the valid attachments everything of the sandboxes
// whose setup overlapped GC: the inventory of each as it is now (the cache
// entries planning saw, the order record read again), with what planning
// read of the record and what the setup asked for. The caller holds the
// gate exclusively, so no setup is in flight.
func (m *Manager) protectSetups(g *gcPlan, watch *setupWatch, set *networkSet) {
	seen := watch.attachments()
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		recorded, err := m.cache.ReadOrder(id) // unreadable: what planning read and the setup asked for stay
		inv := mergeInventory(id, recorded, err, g.byID[id], nil, set)
		inv.include(recordAttachments(g.recs.byID[id]))
		inv.include(seen[id])
		g.valid.addAll(id, inv)
	}
}

// gcVerb sends GC to every plugin of the list with the valid attachments.
func (m *Manager) gcVerb(ctx context.Context, list *libcni.NetworkConfigList, valid []types.GCAttachment) error {
	inject := map[string]interface{}{
		"name":                      list.Name,
		"cniVersion":                list.CNIVersion,
		"cni.dev/valid-attachments": valid,
		"cni.dev/attachments":       valid, // the name an earlier spec draft used
	}
	var errs []error
	for _, p := range list.Plugins {
		conf, err := libcni.InjectConf(p, inject)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
			continue
		}
		path, err := m.exec.FindInPath(p.Network.Type, m.opts.binDirs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args := &invoke.Args{Command: "GC", Path: joinPath(m.opts.binDirs)}
		if err := invoke.ExecPluginWithoutResult(ctx, path, conf.Bytes, args, m.exec); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
		}
	}
	return errors.Join(errs...)
}

// joinPath joins bin dirs into a CNI_PATH value.
func joinPath(dirs []string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
