package ocicni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/pkg/cache"

	"github.com/seed-671fdd43/ocicni/internal/admit"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// attacher sets pods up (attach.go).
type attacher struct {
	*engine
	opts   setupOptions
	detach deleter // rolls back what a failed setup attached
}

// setupOptions are the options a setup reads.
type setupOptions struct {
	netns           NetNSOps // brings lo up
	rollbackTimeout time.Duration
}

// setUp is [Manager.SetUpPodWithContext]: see there.
func (a *attacher) setUp(ctx context.Context, pod PodNetwork) (_ []NetResult, err error) {
	ctx, span := a.startOp(ctx, opSetup, &pod)
	defer func() { span.End(ctx, telemetry.OutcomeOf(err), err) }()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ocicni: setting up pod %s: %w", pod.ID, err)
	}
	if err := checkPodArgs(&pod); err != nil {
		return nil, err
	}
	if err := checkNetNS(pod.NetNS); err != nil {
		return nil, err
	}
	set := a.snapshot()
	atts, err := assignIfnames(pod.Networks, set.DefaultName())
	if err != nil {
		return nil, a.explainDefault(err, set)
	}
	plans := make([]*plan, 0, len(atts))
	for _, att := range atts {
		var n *network
		if n, set, err = a.lookup(ctx, set, att.Name); err != nil {
			return nil, err
		}
		p, err := a.loadedPlan(&pod, att, n)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}

	ctx, lease, err := a.lease(ctx, pod.ID, lockMust)
	if err != nil {
		return nil, err
	}
	release := a.setups.begin(pod.ID, atts, lease.release) // GC leaves a pod being set up alone (see Manager.GC)
	log := a.podLog(&pod)
	if err := ctx.Err(); err != nil { // expired while waiting: touch nothing
		release()
		return nil, fmt.Errorf("ocicni: setting up pod %s: %w", pod.ID, err)
	}
	had, err := a.reuseLive(&pod, plans, set, log)
	if err != nil { // a live attachment that differs: touch nothing
		release()
		return nil, err
	}
	hold := &setupLocks{release: release, dropGate: lease.dropGate}
	results, err := a.attach(ctx, &pod, plans, had, log, hold)
	if !errors.Is(err, ErrRollbackPending) {
		hold.end()
	}
	return results, err
}

// setupLocks is what a setup holds while it runs: end ends it (its
// admission, then the pod's lock, the gate and the setup's registration
// with GC); dropGate releases only the gate. A rollback runs under the
// setup's hold, admission included, and never waits for one of its own;
// one left in the background gives the admission up.
type setupLocks struct {
	release, dropGate func()
	slot              *admit.Slot // nil until admitted
}

func (h *setupLocks) end() {
	h.slot.Release()
	h.release()
}

// attach brings up lo, records the attachments durably and runs ADD for
// every plan that the sandbox does not hold live already (had.reused[i] is
// nil; see [attacher.reuseLive]), holding the pod's lock. A plan it holds
// live gets its cached result, had.reused[i], and no plugin; when every plan
// is reused nothing runs and nothing is written. lo and the record are
// done while the first plugin starts, since starting a process takes
// longer; no plugin receives its config on stdin before they are done,
// held back by a pluginexec.Gate (which the default executor honours, and
// managedExec for any other). When that work fails, the gate opens with
// the error: the plugin is killed without having read a config, and the
// setup fails with nothing attached. After a failed ADD it rolls back
// what this call added (see [attacher.failSetup]), never a reused
// attachment; when the caller's context ends before the rollback does,
// the rollback goes on in the background, keeps holding the pod's lock
// (hold, which it then releases) and the returned *SetupError matches
// ErrRollbackPending. In every other case the caller releases.
func (a *attacher) attach(ctx context.Context, pod *PodNetwork, plans []*plan, had sandboxBefore, log *logrus.Entry,
	hold *setupLocks,
) ([]NetResult, error) {
	results := make([]NetResult, len(plans))
	var fresh []*plan // the plans to ADD, in order
	var at []int      // their index in plans
	for i, p := range plans {
		results[i] = NetResult{Result: had.reused[i], NetAttachment: p.NetAttachment}
		if had.reused[i] == nil {
			fresh, at = append(fresh, p), append(at, i)
		}
	}
	if len(fresh) == 0 {
		log.WithField("networks", len(results)).Info("Pod already attached to its CNI networks; returning the cached results")
		return results, nil
	}
	if len(fresh) < len(plans) {
		log.WithField("live", len(plans)-len(fresh)).Info("Pod already holds some of its attachments; adding the others")
	}
	var err error
	if hold.slot, err = a.admit.setup.Acquire(ctx); err != nil { // nothing ran: lo and the record are left as they were
		return nil, fmt.Errorf("ocicni: setting up pod %s: %w: %w", pod.ID, ErrNotAdmitted, err)
	}

	gate := pluginexec.NewGate()
	var order []cache.Attachment
	go func(ctx context.Context) {
		var err error
		order, err = a.prepareSetup(ctx, pod, plans, had.record, log)
		gate.Release(err)
	}(ctx)

	for i, p := range fresh {
		if debugEnabled(log) {
			planLog(log, p, "ADD").WithField("type", p.list.Plugins[0].Network.Type).Debug("Adding pod to CNI network")
		}
		actx, cancel := planRun(ctx, p, "ADD", reasonSetup)
		if i == 0 {
			actx = pluginexec.WithGate(actx, gate)
		}
		res, err := a.cni.add(actx, p.list, p.rt)
		cancel()
		if i == 0 {
			// Nothing is attached unless lo is up and the record written;
			// the work is bounded, so it is waited for whatever ctx does.
			if gerr := gate.Wait(context.Background()); gerr != nil {
				return nil, gerr
			}
		}
		if err == nil {
			results[at[i]].Result = res
			continue
		}
		serr := &SetupError{ContainerID: pod.ID, Err: &NetworkError{Network: p.Name, IfName: p.Ifname, Verb: "ADD", Err: err}}
		return nil, a.failSetup(ctx, pod, fresh, i, order, serr, log, hold)
	}
	for _, p := range fresh {
		a.fresh.add(pod.ID, p)
	}
	log.WithField("networks", len(results)).Info("Attached pod to its CNI networks")
	return results, nil
}

// prepareSetup brings up lo in the pod's netns and then records the
// attachments (see [sandboxStore.recordSetup]): what must be done before any
// plugin receives an ADD config. It returns the record.
func (a *attacher) prepareSetup(ctx context.Context, pod *PodNetwork, plans []*plan, old []cache.Attachment, log *logrus.Entry,
) ([]cache.Attachment, error) {
	if err := a.opts.netns.LoopbackUp(ctx, pod.NetNS); err != nil {
		return nil, fmt.Errorf("ocicni: bringing up lo in %s: %w", pod.NetNS, err)
	}
	order, err := a.store.recordSetup(ctx, pod, plans, old, log)
	if err != nil {
		return nil, fmt.Errorf("ocicni: setting up pod %s: recording its attachments before ADD: %w", pod.ID, err)
	}
	return order, nil
}

// failSetup rolls back a setup whose ADD of plans[failed] failed: DEL for
// it and the attachments before it, in reverse order, under
// [WithRollbackTimeout]; the attachments after it, never added, leave the
// record written before the ADDs (recorded). plans are the ones this call
// ran or would have run ADD for: an attachment the sandbox held live
// before the call is none of them, so it is neither deleted nor dropped
// from the record. It returns serr once the rollback finished, with its
// failures; or, when ctx ends first, at once, with serr matching
// ErrRollbackPending, and the rollback goes on in the background, holding
// the pod's lock but neither the gate (it holds back no GC) nor its
// admission (it holds back no pod), and then releases hold. The caller's
// deadline is a promise, also when the ADD failed fast and the rollback
// is slow.
func (a *attacher) failSetup(ctx context.Context, pod *PodNetwork, plans []*plan, failed int, recorded []cache.Attachment,
	serr *SetupError, log *logrus.Entry, hold *setupLocks,
) error {
	finished := make(chan *TeardownError, 1)
	a.rollbacks.Add()
	go func() {
		defer a.rollbacks.Done()
		rctx, span := a.tel.StartRollback(ctx, pod.ID, failed+1)
		rerr := a.rollback(rctx, pod, plans[:failed+1], plans[failed+1:], recorded, log)
		var err error
		if rerr != nil {
			err = rerr
		}
		span.End(rctx, telemetry.OutcomeOf(err), err)
		finished <- rerr
	}()
	select {
	case rerr := <-finished:
		return serr.withRollback(rerr)
	case <-ctx.Done():
	}
	select {
	case rerr := <-finished: // finished as the deadline passed
		return serr.withRollback(rerr)
	default:
	}
	serr.Cause, serr.RollbackPending = ctx.Err(), true
	hold.dropGate()
	hold.slot.Release() // pods first: a rollback left in the background counts against no bound
	a.rollbacks.Add()
	go func() {
		defer a.rollbacks.Done()
		defer hold.end()
		if rerr := <-finished; rerr != nil {
			log.WithError(rerr).Error("Background rollback of a setup whose deadline passed failed; " +
				"the attachments stay recorded for DEL retries, teardown and GC")
		} else {
			log.Info("Background rollback of a setup whose deadline passed finished")
		}
	}()
	return serr
}

// rollback deletes, in reverse order and best effort, the attachments of a
// failed setup (plans), including the one whose ADD failed. It runs under
// its own timeout even when ctx has ended, and settles the order record
// (see [sandboxStore.settle]): of the attachments the setup recorded, it keeps
// exactly those whose DEL failed, for retries, teardown and GC, and drops
// those never added (untried). It returns the failures, nil when every DEL
// succeeded.
func (a *attacher) rollback(ctx context.Context, pod *PodNetwork, plans, untried []*plan, recorded []cache.Attachment,
	log *logrus.Entry,
) *TeardownError {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.rollbackTimeout)
	defer cancel()
	reversed := slices.Clone(plans)
	slices.Reverse(reversed)
	// The DELs run with the configs and runtime configs the ADDs ran
	// with; what each may do with the cache entry its ADD left is the
	// inventory's to say.
	atts := make([]NetAttachment, len(reversed))
	for i, p := range reversed {
		atts[i] = p.NetAttachment
	}
	inv := a.store.takeInventory(pod.ID, atts, a.snapshot(), log)
	for _, p := range reversed {
		inv.knownFor(p.NetAttachment).applyCacheRule(p, func() *logrus.Entry { return planLog(log, p, "DEL") })
	}
	outcomes := a.detach.deleteAll(rctx, reversed, log, reasonRollback)
	never := make([]NetAttachment, len(untried))
	for i, p := range untried {
		never[i] = p.NetAttachment
	}
	// A commit that fails is finished by the healer (see settle), and the
	// setup's error says what the rollback's DELs did.
	_ = a.store.settle(ctx, pod.ID, settlement{recorded: recorded, never: never, plans: reversed, outcomes: outcomes}, log)
	if !slices.ContainsFunc(outcomes, Outcome.Failure) {
		return nil
	}
	return &TeardownError{ContainerID: pod.ID, Outcomes: outcomes}
}

// What follows is setup's rule for attachments the sandbox already holds
// (see [AttachedError]). The CNI spec forbids a second
// ADD of one (network, container, ifname) without a DEL between them, and
// the rollback of such an ADD, which fails with plugins like bridge
// ("eth0 already exists"), would delete what an earlier setup returned.
// So a setup never runs ADD for a live attachment, and a rollback never
// deletes one: an identical request gets the cached result, a different
// one is refused before anything runs.

// live reports whether the known attachment is live: its ADD succeeded
// and no DEL was asked for since. libcni writes the cache entry only once
// ADD succeeded, and removes it (as the engine does) only once DEL
// succeeded; a DEL that failed leaves the entry but marks the record line
// with its retry state. A line written before an ADD that then failed or
// crashed has no entry. A corrupt entry proves nothing and is not live.
func (s *knownAttachment) live() bool {
	return s.entry != nil && (s.rec == nil || s.rec.Heal == nil)
}

// sandboxBefore is what a setup's sandbox holds when the setup starts, as its
// inventory read it under the sandbox's lock (see [attacher.reuseLive]).
type sandboxBefore struct {
	// reused[i] is the cached result of plans[i], converted to its
	// config's version, when the sandbox holds it live and identical to
	// the plan: no ADD runs for it. It is nil when plans[i] must be added.
	reused []types.Result
	// record is the sandbox's order record, which the setup's record
	// replaces; nil when there is none or it is unreadable.
	record []cache.Attachment
}

// reuseLive reads, under the sandbox's lock and before anything runs,
// what the sandbox holds: which of a setup's plans it holds live, and its
// record (see [sandboxBefore]). A live attachment that differs from its plan (see
// [liveDiff]), or whose cached result cannot be read, refuses the setup
// with an *[AttachedError].
func (a *attacher) reuseLive(pod *PodNetwork, plans []*plan, set *networkSet, log *logrus.Entry) (sandboxBefore, error) {
	atts := make([]NetAttachment, len(plans))
	for i, p := range plans {
		atts[i] = p.NetAttachment
	}
	inv := a.store.takeInventory(pod.ID, atts, set, log)
	reused := make([]types.Result, len(plans))
	for i, p := range plans {
		s := inv.knownFor(p.NetAttachment)
		if !s.live() {
			continue
		}
		refuse := func(reason string, err error) error {
			return &AttachedError{ContainerID: pod.ID, Network: p.Name, IfName: p.Ifname, Reason: reason, Err: err}
		}
		if reason := liveDiff(s, p); reason != "" {
			return sandboxBefore{}, refuse(reason, nil)
		}
		res, err := s.entry.ResultAt(p.list.CNIVersion)
		switch {
		case err != nil:
			return sandboxBefore{}, refuse("its cached result cannot be read", err)
		case res == nil:
			return sandboxBefore{}, refuse("its cache entry holds no result", nil)
		}
		reused[i] = res
	}
	h := sandboxBefore{reused: reused}
	if inv.recordErr == nil { // an unreadable record is replaced
		h.record = inv.record
	}
	return h, nil
}

// liveDiff returns what differs between the live attachment s and the
// plan p of the same network and ifname, or "" when they are identical:
// the very config bytes (libcni caches the list's bytes at ADD, and the
// record saves their digest), the netns, and the runtime arguments
// (CNI_ARGS and runtime-config capabilities) the ADD ran with.
func liveDiff(s *knownAttachment, p *plan) string {
	e := s.entry
	if !bytes.Equal(e.Config, p.list.Bytes) ||
		s.rec != nil && s.rec.Config != "" && s.rec.Config != ledger.ConfigDigest(p.list.Bytes) {
		return "its config differs from the loaded one"
	}
	netns := e.NetNS
	if netns == "" {
		netns = recNetNS(s.rec)
	}
	switch {
	case netns == "":
		return "its netns is not known"
	case netns != p.rt.NetNS || s.rec != nil && s.rec.NetNS != "" && s.rec.NetNS != p.rt.NetNS:
		return fmt.Sprintf("lives in netns %s", netns)
	case !slices.Equal(e.CNIArgs, p.rt.Args):
		return "its CNI_ARGS differ"
	case !sameCapabilities(e.CapabilityArgs, p.rt.CapabilityArgs):
		return "its runtime config differs"
	}
	return ""
}

// sameCapabilities reports whether the runtime-config capabilities a
// cache entry holds (decoded from JSON) are those of want, compared as
// libcni stores them: encoded to JSON and decoded again.
func sameCapabilities(cached, want map[string]any) bool {
	if len(cached) == 0 || len(want) == 0 {
		return len(cached) == len(want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var decoded map[string]any
	if err := json.Unmarshal(b, &decoded); err != nil {
		return false
	}
	return reflect.DeepEqual(cached, decoded)
}
