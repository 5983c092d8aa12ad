package ocicni

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// acquire takes the shared gate and the pod's lock, in the documented
// order, and returns their release.
func (m *Manager) acquire(ctx context.Context, id string) (func(), error) {
	if err := m.gate.rlock(ctx); err != nil {
		return nil, fmt.Errorf("ocicni: waiting for GC: %w", err)
	}
	unlockPod, err := m.pods.lock(ctx, id)
	if err != nil {
		m.gate.runlock()
		return nil, fmt.Errorf("ocicni: waiting for pod %s: %w", id, err)
	}
	return func() {
		unlockPod()
		m.gate.runlock()
	}, nil
}

// beginPodOp validates the pod's identity and takes its locks, for the
// verbs that need nothing else checked first.
func (m *Manager) beginPodOp(ctx context.Context, pod *PodNetwork) (func(), *logrus.Entry, error) {
	if err := checkPodArgs(pod); err != nil {
		return nil, nil, err
	}
	release, err := m.acquire(ctx, pod.ID)
	if err != nil {
		return nil, nil, err
	}
	return release, m.podLog(pod), nil
}

func (m *Manager) podLog(pod *PodNetwork) *logrus.Entry {
	return m.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "sandbox": pod.ID})
}

// debugEnabled reports whether log writes Debug lines. Their fields are
// built only then: logrus builds an entry's fields whatever the level.
func debugEnabled(log *logrus.Entry) bool { return log.Logger.IsLevelEnabled(logrus.DebugLevel) }

func planLog(log *logrus.Entry, p *plan, verb string) *logrus.Entry {
	return log.WithFields(logrus.Fields{"network": p.Name, "ifname": p.Ifname, "verb": verb})
}

// SetUpPod attaches the pod to its networks. See [Manager.SetUpPodWithContext].
func (m *Manager) SetUpPod(pod PodNetwork) ([]NetResult, error) {
	return m.SetUpPodWithContext(context.Background(), pod)
}

// SetUpPodWithContext brings up lo in the pod's netns and attaches the
// requested networks in order (the default network when none are named).
// It returns one result per network, in request order. When an ADD fails,
// the attachments made so far and the failed one are deleted again
// (rollback) before the error, a *[SetupError], is returned.
func (m *Manager) SetUpPodWithContext(ctx context.Context, pod PodNetwork) ([]NetResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ocicni: setting up pod %s: %w", pod.ID, err)
	}
	if err := checkPodArgs(&pod); err != nil {
		return nil, err
	}
	if err := checkNetNS(pod.NetNS); err != nil {
		return nil, err
	}
	set := m.snapshot()
	atts, err := assignIfnames(pod.Networks, set.defaultName)
	if err != nil {
		return nil, m.explainDefault(err, set)
	}
	plans := make([]*plan, 0, len(atts))
	for _, att := range atts {
		var n *network
		if n, set, err = m.lookup(ctx, set, att.Name); err != nil {
			return nil, err
		}
		rt, err := buildRuntimeConf(&pod, att)
		if err != nil {
			return nil, err
		}
		plans = append(plans, &plan{NetAttachment: att, id: pod.ID, list: n.list, rt: rt, policy: n.policy})
	}

	release, err := m.acquire(ctx, pod.ID)
	if err != nil {
		return nil, err
	}
	release = m.setups.begin(pod.ID, atts, release) // GC leaves a pod being set up alone (see Manager.GC)
	log := m.podLog(&pod)
	if err := ctx.Err(); err != nil { // expired while waiting: touch nothing
		release()
		return nil, fmt.Errorf("ocicni: setting up pod %s: %w", pod.ID, err)
	}
	results, err := m.attach(ctx, &pod, plans, log, release)
	if !errors.Is(err, ErrRollbackPending) {
		release()
	}
	return results, err
}

// attach brings up lo, records the order and runs every ADD, holding the
// pod's lock. After a failed ADD it rolls back; when ctx is already done
// the rollback goes on in the background, keeps holding the pod's lock
// (release, which it then calls) and the returned *SetupError matches
// ErrRollbackPending. In every other case the caller releases.
func (m *Manager) attach(ctx context.Context, pod *PodNetwork, plans []*plan, log *logrus.Entry, release func()) ([]NetResult, error) {
	if err := m.opts.netns.LoopbackUp(ctx, pod.NetNS); err != nil {
		return nil, fmt.Errorf("ocicni: bringing up lo in %s: %w", pod.NetNS, err)
	}
	order := make([]cache.Attachment, len(plans))
	for i, p := range plans {
		order[i] = cache.Attachment{Network: p.Name, IfName: p.Ifname, NetNS: pod.NetNS}
	}
	if err := m.cache.WriteOrder(pod.ID, order); err != nil {
		log.WithError(err).Warn("Cannot record attachment order; teardown will use the fallback order")
	}

	results := make([]NetResult, 0, len(plans))
	for i, p := range plans {
		if debugEnabled(log) {
			planLog(log, p, "ADD").WithField("type", p.list.Plugins[0].Network.Type).Debug("Adding pod to CNI network")
		}
		res, err := m.cni.AddNetworkList(ctx, p.list, p.rt)
		if err == nil {
			results = append(results, NetResult{Result: res, NetAttachment: p.NetAttachment})
			continue
		}
		serr := &SetupError{ContainerID: pod.ID, Err: &NetworkError{Network: p.Name, IfName: p.Ifname, Verb: "ADD", Err: err}}
		if cerr := ctx.Err(); cerr != nil {
			// The caller's deadline is a promise: return now, and let the
			// rollback finish in the background under its own timeout.
			serr.Cause, serr.RollbackPending = cerr, true
			m.rollbacks.add()
			go func() {
				defer m.rollbacks.done()
				defer release()
				if rerr := m.rollback(ctx, pod, plans[:i+1], log); rerr != nil {
					log.WithError(rerr).Error("Background rollback of a setup whose deadline passed failed; " +
						"the attachments stay recorded for teardown and GC")
				} else {
					log.Info("Background rollback of a setup whose deadline passed finished")
				}
			}()
			return nil, serr
		}
		if rerr := m.rollback(ctx, pod, plans[:i+1], log); rerr != nil {
			serr.Rollback = rerr
		}
		return nil, serr
	}
	log.WithField("networks", len(results)).Info("Attached pod to its CNI networks")
	return results, nil
}

// rollback deletes, in reverse order and best effort, the attachments of a
// failed setup, including the one whose ADD failed. It runs under its own
// timeout even when ctx has expired. The order record keeps exactly the
// attachments whose rollback DEL failed, for teardown and GC. It returns
// the failures, nil when every DEL succeeded.
func (m *Manager) rollback(ctx context.Context, pod *PodNetwork, plans []*plan, log *logrus.Entry) *TeardownError {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.rollbackTimeout)
	defer cancel()
	reversed := make([]*plan, len(plans))
	for i, p := range plans {
		reversed[len(plans)-1-i] = p
	}
	outcomes := m.deleteAll(rctx, reversed, log, "rollback")
	var left []cache.Attachment
	for i := len(outcomes) - 1; i >= 0; i-- { // back to ADD order
		if o := outcomes[i]; o.Failure() {
			left = append(left, cache.Attachment{Network: o.Network, IfName: o.IfName, NetNS: pod.NetNS})
		}
	}
	var err error
	var terr *TeardownError
	if len(left) == 0 {
		err = m.cache.RemoveOrder(pod.ID)
	} else {
		terr = &TeardownError{ContainerID: pod.ID, Outcomes: outcomes}
		err = m.cache.WriteOrder(pod.ID, left)
	}
	if err != nil {
		log.WithError(err).Warn("Cannot update attachment order record after rollback")
	}
	return terr
}

// explainDefault turns a missing default network into an error that says
// where configs were looked for and why files were skipped.
func (m *Manager) explainDefault(err error, set *networkSet) error {
	if !errors.Is(err, ErrNoDefaultNetwork) {
		return err
	}
	return m.noDefaultError(set)
}

func (m *Manager) noDefaultError(set *networkSet) error {
	if set.defaultName != "" {
		return fmt.Errorf("%w: %w", ErrNoDefaultNetwork, set.notFound(set.defaultName, m.opts.confDir))
	}
	err := fmt.Errorf("%w: no valid CNI configuration in %s. Has your network provider started?",
		ErrNoDefaultNetwork, m.opts.confDir)
	errs := []error{err}
	for _, sk := range set.skipped {
		errs = append(errs, sk)
	}
	return errors.Join(errs...)
}
