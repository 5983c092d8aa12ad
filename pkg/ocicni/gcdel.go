package ocicni

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/locks"
)

// deleteStale runs the DELs of the stale containers on up to
// [WithGCWorkers] workers. Each container is handled by one worker, under
// its own lock (see [collector.deleteStaleContainer]), so no two operations
// ever run for the same container, while different containers proceed in
// parallel as the spec allows, unless pods are being set up meanwhile
// (see gcPacer). At until (unless zero) the DELs in flight are cut short
// and no other starts: each gets a RetryLater outcome, and the next GC
// deletes them (see verbsReserved). Outcomes and errors come back in
// planning order: for each container, the failures planning found, then
// its DELs in the order they ran.
func (c *collector) deleteStale(ctx context.Context, until time.Time, stale []*staleContainer, watch *setupWatch, log *logrus.Entry,
) ([]Outcome, []error) {
	if !until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, until, errGCVerbReserve)
		defer cancel()
	}
	outcomes := make([][]Outcome, len(stale))
	errs := make([][]error, len(stale))
	next := make(chan int)
	pacer := newGCPacer(ctx, c.opts.gcPace, c.setups)
	var wg sync.WaitGroup
	for range min(c.opts.gcWorkers, len(stale)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ran := ctx.Err() == nil && pacer.run(ctx, len(stale)-i, func(ctx context.Context) {
					outcomes[i], errs[i] = c.deleteStaleContainer(ctx, stale[i], watch, log)
				})
				if !ran { // ctx ended first: the caller's, or GC's reserve for its verbs
					outcomes[i], errs[i] = notAcquired(stale[i], ctxErr(ctx))
				}
			}
		}()
	}
	for i := range stale {
		next <- i
	}
	close(next)
	wg.Wait()
	var all []Outcome
	for i, sc := range stale {
		all = slices.Concat(all, sc.failures, outcomes[i])
	}
	return all, slices.Concat(errs...)
}

// deleteStaleContainer takes the gate shared and the container's lock, as
// a pod operation does, and then runs the container's DELs that still
// apply and prunes its order record. It returns the DELs' outcomes, and
// an error for each failed one. It leaves the container alone when a
// setup of it began since GC opened watch: the runtime is creating it
// again, and GC's plan is out of date. The attachments it leaves alone,
// for that reason or because a teardown deleted them since GC planned,
// get no outcome. So does a container that another engine or process
// holds, or worked on lately (see [engine.othersWorkedOn]). When it
// cannot take the locks, each planned DEL gets a RetryLater (or Failed)
// outcome with the reason.
func (c *collector) deleteStaleContainer(ctx context.Context, sc *staleContainer, watch *setupWatch, log *logrus.Entry,
) ([]Outcome, []error) {
	clog := log.WithField("sandbox", sc.id)
	ctx, l, err := c.lease(ctx, sc.id, lockTry)
	if errors.Is(err, locks.ErrBusy) {
		clog.Info("GC leaves a sandbox alone: another engine is working on it")
		return nil, nil
	}
	if err != nil {
		return notAcquired(sc, err)
	}
	defer l.release()
	if c.leaveAlone(l, sc.id, watch, clog) {
		return nil, nil
	}
	recorded, rerr := c.store.readRecord(sc.id)
	plans := make([]*plan, 0, len(sc.plans))
	for _, p := range sc.plans {
		if c.stillStale(p, recorded) {
			plans = append(plans, p)
		} else if debugEnabled(clog) {
			planLog(clog, p, "DEL").Debug("Stale attachment deleted by a teardown that ran since GC planned")
		}
	}
	var errs []error
	outcomes := c.detach.deleteAll(ctx, plans, clog, reasonGC)
	for _, o := range outcomes {
		if o.Failure() {
			errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
		}
	}
	s := settlement{recorded: recorded, rerr: rerr, plans: plans, outcomes: outcomes, strays: sc.strays && recorded == nil && rerr == nil}
	if rerr != nil && c.scopeKeepsUnreadableRecords() {
		// It may name attachments GC cannot tell: neither replaced nor removed.
		clog.WithError(rerr).Warn("GC leaves an unreadable attachment order record as it is")
		s = settlement{plans: plans, outcomes: outcomes} // the entries alone
	}
	c.store.pruneStaleRecord(ctx, sc.id, s, clog)
	return outcomes, errs
}

// notAcquired returns the outcomes and errors of a stale container whose
// locks GC could not take (err): each planned DEL did not run. Without a
// planned DEL, err is returned alone.
func notAcquired(sc *staleContainer, err error) ([]Outcome, []error) {
	if len(sc.plans) == 0 {
		return nil, []error{err}
	}
	class := Failed
	if classify(err) == RetryLater {
		class = RetryLater
	}
	outcomes := make([]Outcome, 0, len(sc.plans))
	errs := make([]error, 0, len(sc.plans))
	for _, p := range sc.plans {
		outcomes = append(outcomes, Outcome{ContainerID: sc.id, Network: p.Name, IfName: p.Ifname, Class: class, Err: err, Policy: p.policy})
		errs = append(errs, &NetworkError{Network: p.Name, IfName: p.Ifname, Verb: "DEL", Err: err})
	}
	return outcomes, errs
}
