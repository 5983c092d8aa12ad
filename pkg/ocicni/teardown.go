package ocicni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/telemetry"
)

// deleter runs the DELs of planned attachments, best effort, in order
// (see [detacher.deleteAll]): what setup's rollback and GC need of
// teardown.
type deleter interface {
	deleteAll(ctx context.Context, plans []*plan, log *logrus.Entry, why string) []Outcome
}

// detacher tears pods down, forgets their cache files and retries failed
// DELs for the healer (teardown.go, forget.go).
type detacher struct {
	*engine
	opts teardownOptions
}

// teardownOptions are the options a teardown reads.
type teardownOptions struct {
	policy         TeardownPolicy // the default; a network's config may override it
	delStopAtCode3 bool           // see WithDELStopAtUnknownContainer
	heal           HealPolicy     // a DEL retry's timeout
}

// tearDown is [Manager.TearDownPodOutcomes]: see there.
func (d *detacher) tearDown(ctx context.Context, pod PodNetwork) (_ []Outcome, err error) {
	ctx, span := d.startOp(ctx, opTeardown, &pod)
	defer func() { span.End(ctx, telemetry.OutcomeOf(err), err) }()
	if pod.NetNS != "" {
		// The netns may be gone already, but it must never be the host's.
		if _, err := usableStoredNetNS(pod.NetNS); err != nil {
			return nil, err
		}
	}
	ctx, release, log, err := d.beginPodOp(ctx, &pod)
	if err != nil {
		return nil, err
	}
	defer release()
	d.fresh.forget(pod.ID) // a status after this runs CHECK

	inv, plans, err := d.teardownPlans(&pod, log)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(plans, func(p *plan) bool { return p.list != nil }) { // a plugin will run
		slot, err := d.admit.teardown.Acquire(ctx)
		if err != nil { // nothing ran: the record and the cache are as they were
			return nil, fmt.Errorf("ocicni: tearing down pod %s: %w: %w", pod.ID, ErrNotAdmitted, err)
		}
		defer slot.Release()
	}
	outcomes := slices.Concat(inv.failures, d.deleteAll(ctx, plans, log, reasonTeardown))
	err = d.teardownResult(&pod, outcomes, log)
	serr := d.store.settle(ctx, pod.ID, settlement{
		recorded: inv.record, rerr: inv.recordErr, plans: plans, outcomes: outcomes,
		strays: inv.record == nil && inv.recordErr == nil, // a setup killed before it wrote the record
	}, log)
	if serr != nil { // the DELs ran; what they did is recorded in the background
		return outcomes, errors.Join(err, serr)
	}
	if err == nil {
		log.WithField("attachments", len(outcomes)).Info("Detached pod from its CNI networks")
	}
	return outcomes, err
}

// teardownPlans takes the pod's inventory and plans the DELs, in the
// order to run them: the requested networks in reverse request order, or,
// with none requested, every attachment the inventory holds in reverse
// ADD order. With nothing known at all it plans the default network's
// eth0 (see [inventory.orDefault]).
func (d *detacher) teardownPlans(pod *PodNetwork, log *logrus.Entry) (*inventory, []*plan, error) {
	set := d.snapshot()
	var requested []NetAttachment
	if len(pod.Networks) > 0 {
		atts, err := assignIfnames(pod.Networks, "")
		if err != nil {
			return nil, nil, err
		}
		slices.Reverse(atts)
		requested = atts
	}
	inv := d.store.takeInventory(pod.ID, requested, set, log)
	if inv.recordErr != nil {
		log.WithError(inv.recordErr).Warn("Cannot read attachment order; using the fallback order")
	}
	if requested == nil {
		inv.orDefault(set.DefaultName())
		sortForTeardown(inv.known, inv.record)
	}
	plans := make([]*plan, 0, len(inv.known))
	for _, s := range inv.known {
		p, err := d.planFor(pod, pod.NetNS, s, set, log)
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, p)
	}
	return inv, plans, nil
}

// deleteAll runs DEL for every plan in the given order and never stops
// early. Attachments whose plugin reports the container unknown count as
// deleted, and their cache entries are removed. Every DEL that fails is
// counted, by class and reason why, for the metrics.
func (d *detacher) deleteAll(ctx context.Context, plans []*plan, log *logrus.Entry, why string) []Outcome {
	outcomes := make([]Outcome, 0, len(plans))
	for _, p := range plans {
		plog := func() *logrus.Entry { // built only to log
			return log.WithFields(logrus.Fields{"network": p.Name, "ifname": p.Ifname, "verb": "DEL", "reason": why})
		}
		o := Outcome{ContainerID: p.id, Network: p.Name, IfName: p.Ifname, Policy: p.policy}
		if p.list == nil {
			o.Class, o.Err = NoConfig, ErrNoConfig
			if p.corrupt != nil {
				o.Err = fmt.Errorf("%w: %w", p.corrupt, ErrNoConfig)
			}
			if p.onDisk {
				o.Class = Orphaned // a failure: returned, not logged here
			} else {
				plog().Warn("No config and no cache entry for attachment; nothing to run DEL with")
			}
			outcomes = append(outcomes, o)
			continue
		}
		err := d.del(ctx, p, why, plog)
		o.Class, o.Err = classify(err), err
		switch o.Class {
		case Deleted:
			if log.Logger.IsLevelEnabled(logrus.DebugLevel) {
				plog().Debug("Deleted pod from CNI network")
			}
		case AlreadyGone:
			if len(p.list.Plugins) > 1 && d.opts.delStopAtCode3 {
				// libcni stops a list's DEL at the first plugin that
				// answers code 3, so the plugins before it in the list
				// got no DEL (WithDELStopAtUnknownContainer). The spec
				// allows it; say so where it shows.
				plog().WithError(err).Warn("A plugin reported the container unknown (code 3); libcni ran no DEL " +
					"for the plugins before it in the list. Counted as deleted; GC or the plugins' own GC must collect their state")
			} else {
				plog().WithError(err).Info("CNI plugin reports the container unknown; counted as deleted")
			}
		}
		outcomes = append(outcomes, o)
	}
	for _, o := range outcomes {
		if o.Failure() {
			d.tel.DELFailed(ctx, o.Network, why, o.Class.String())
		}
	}
	return outcomes
}

// del runs the plan's DEL, for why (see [PluginRun].Reason). When libcni
// panics while it may read the cache entry (see [PanicError]), the entry
// is handled as corrupt: DEL runs again without it, and the file stays
// until a DEL succeeds.
func (d *detacher) del(ctx context.Context, p *plan, why string, plog func() *logrus.Entry) error {
	ctx, cancel := planRun(ctx, p, "DEL", why)
	defer cancel()
	err := d.cni.del(ctx, p.list, p.rt, p.cacheEntry)
	var pe *PanicError
	if p.cacheEntry != "" && errors.As(err, &pe) {
		plog().WithError(err).Warn("libcni panicked over the cache entry; running DEL without it and keeping the entry until DEL succeeds")
		p.cacheEntry = ""
		err = d.cni.del(ctx, p.list, p.rt, "")
	}
	if classify(err) == AlreadyGone && len(p.list.Plugins) > 1 && !d.opts.delStopAtCode3 {
		// libcni stopped the list's DEL at the plugin that answered
		// code 3; the plugins before it still hold what they hold.
		plog().WithError(err).Info("A plugin reported the container unknown (code 3); " +
			"running DEL for every plugin of the list")
		err = d.delEachPlugin(ctx, p)
	}
	return err
}

// delEachPlugin runs DEL for every plugin of the plan's list, last to
// first, as single-plugin lists, best effort: code 3 from one plugin does
// not stop the others, and counts as success. libcni is kept away from
// the cache entry (a single plugin's DEL would remove it after the first
// success), so prevResult is not passed, and the plan no longer uses the
// cache: its entry goes when the DELs' outcome is committed (see
// [entriesToDrop]). It returns the first error other than code 3.
func (d *detacher) delEachPlugin(ctx context.Context, p *plan) error {
	p.cacheEntry = ""
	var firstErr error
	for i := len(p.list.Plugins) - 1; i >= 0; i-- {
		one := &libcni.NetworkConfigList{
			Name: p.list.Name, CNIVersion: p.list.CNIVersion,
			Plugins: p.list.Plugins[i : i+1],
		}
		if err := d.cni.del(ctx, one, p.rt, ""); err != nil && classify(err) != AlreadyGone && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// teardownResult applies the policy: strict failures become a
// *TeardownError; tolerated ones are logged, since they are absorbed here.
func (d *detacher) teardownResult(pod *PodNetwork, outcomes []Outcome, log *logrus.Entry) error {
	strict := false
	for i := range outcomes {
		o := &outcomes[i]
		if o.Policy == "" {
			o.Policy = d.opts.policy
		}
		if !o.Failure() {
			continue
		}
		o.Tolerated = o.Policy == Tolerant
		if !o.Tolerated {
			strict = true
			continue
		}
		log.WithFields(logrus.Fields{
			"network": o.Network, "ifname": o.IfName, "verb": "DEL",
			"outcome": o.Class.String(),
		}).WithError(o.Err).
			Error("Tolerating CNI DEL failure; the attachment stays recorded for retry and GC")
	}
	if strict {
		return &TeardownError{ContainerID: pod.ID, Outcomes: outcomes}
	}
	return nil
}

// retryDELs is the healer's retry (see [HealPolicy]): it runs the due
// DELs of sandbox id, as its inventory knows them, under its lock. The
// wait for the lock ends with ctx (Shutdown); the DELs run under the
// policy's timeout, and not under ctx, so that Shutdown lets a retry in
// flight finish. Its span is a new trace, linked to link, the span of the
// operation whose DEL failed last.
func (d *detacher) retryDELs(ctx context.Context, id string, link trace.SpanContext) {
	ctx, span := d.tel.StartHeal(ctx, link, id)
	outcomes, err := d.retryDELsLocked(ctx, id)
	if i := slices.IndexFunc(outcomes, Outcome.Failure); err == nil && i >= 0 {
		err = &NetworkError{Network: outcomes[i].Network, IfName: outcomes[i].IfName, Verb: "DEL", Err: outcomes[i].Err}
	}
	span.End(ctx, telemetry.OutcomeOf(err), err)
}

// retryDELsLocked is retryDELs under the sandbox's lock: it returns the
// outcomes of the DELs it ran, or why it could not run them.
func (d *detacher) retryDELsLocked(ctx context.Context, id string) ([]Outcome, error) {
	ctx, sb, err := d.store.lockSandbox(ctx, d.pods, id, lockBest)
	if err != nil {
		return nil, err // shutting down: the record keeps the retry for the next manager
	}
	defer sb.release()
	log := d.log.WithFields(logrus.Fields{"sandbox": id, "verb": "DEL", "reason": reasonHeal})
	set := d.snapshot()
	inv := d.store.takeInventory(id, nil, set, log)
	if inv.recordErr != nil {
		log.WithError(inv.recordErr).Warn("Cannot read the attachment order record of a sandbox with a pending DEL retry; leaving it to GC")
		return nil, inv.recordErr
	}
	due := inv.withUnsettled(inv.due(time.Now()), d.healer.unsettled.take(id))
	if len(due) == 0 {
		if hs := pendingHeal(inv.record); !hs.due.IsZero() { // a teardown or setup changed it meanwhile
			d.healer.schedule(id, hs.due)
		}
		return nil, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.heal.Timeout)
	defer cancel()
	pod := &PodNetwork{ID: id}
	plans := make([]*plan, 0, len(due))
	for _, s := range due {
		p, err := d.planFor(pod, "", s, set, log)
		if err != nil { // cannot happen: the record's names were validated on read
			log.WithError(err).Warn("Cannot plan the DEL retry of a recorded attachment")
			continue
		}
		plans = append(plans, p)
	}
	outcomes := d.deleteAll(dctx, plans, log, reasonHeal)
	for _, o := range outcomes {
		if !o.Failure() {
			log.WithFields(logrus.Fields{"network": o.Network, "ifname": o.IfName}).
				Info("Background DEL retry finished a teardown")
		}
	}
	if err := d.store.settle(dctx, id, settlement{recorded: inv.record, plans: plans, outcomes: outcomes}, log); err != nil {
		return outcomes, err // rescheduled (see unsettledSet)
	}
	d.healer.unsettled.settled(id)
	return outcomes, nil
}
