package ocicni

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// HealPolicy tunes healing: the background retries of DELs that failed.
// A zero field takes its default. See [WithHealing].
//
// A DEL that failed in a teardown, a rollback or GC is retried in the
// background, under the sandbox's lock only, until it succeeds or its
// plugin answers code 3, or until the horizon, as the fields below say.
// The retry state lives in the order record, so a later manager on the
// same cache dir resumes it, and [Manager.PendingTeardowns] lists it. A running manager also adopts the
// retries that other engines and processes record (a mark beside the lock
// files tells it when to read the records again), so a DEL that failed
// in a one-call process (an OCI hook) is retried by a longer-lived one.
// A retry reads the record again under the sandbox's locks, so managers
// that resume the same retries run each due DEL once; none runs in a
// manager's first [HealPolicy].StartDelay, so a one-call process cuts
// none off. A setup of the same sandbox ID that runs ADD cancels it.
// Every retry reaches the [PluginHook] with Reason "heal".
type HealPolicy struct {
	// Initial is the delay before the first retry; 1 s by default. Each
	// failed retry doubles it, up to Max; each delay is shortened by up to
	// a fifth at random, so that retries of many pods spread out.
	Initial time.Duration
	// Max caps the delay between retries; 5 min by default.
	Max time.Duration
	// Horizon is how long after the first failure retries go on; 24 h by
	// default. After it the attachment stays recorded for GC, and the
	// give-up is logged once at Warn.
	Horizon time.Duration
	// Concurrency is how many sandboxes' retries may run at once on the
	// node; 2 by default.
	Concurrency int
	// SetupConcurrency is how many may run at once while the node sets
	// pods up (a setup in flight, or one begun within the last quarter
	// second); 1 by default, and never more than Concurrency. A retry
	// deletes interfaces, and the kernel serializes that with a setup's
	// interface work, so retries beside setups slow them; pods come first.
	// A retry already running when setups start runs on.
	SetupConcurrency int
	// Timeout bounds one retry of one sandbox (its DELs); 1 min by default.
	Timeout time.Duration
	// StartDelay is how long after a manager starts it begins its first
	// retry; 10 s by default. A process that lives for one call (an OCI
	// hook, a CLI command) so starts no retry that it could not finish
	// before it exits: the retries stay recorded for a manager that lives
	// longer, which resumes them at its start, or adopts them within
	// Initial (at most 2 s) when it runs already. The retries that fall
	// due earlier wait for it.
	StartDelay time.Duration
	// Disabled turns the background retries off (see [WithoutHealing]).
	Disabled bool
}

func defaultHealPolicy() HealPolicy {
	return HealPolicy{
		Initial: time.Second, Max: 5 * time.Minute, Horizon: 24 * time.Hour,
		Concurrency: 2, SetupConcurrency: 1, Timeout: time.Minute, StartDelay: 10 * time.Second,
	}
}

// withDefaults fills the zero fields of p from the defaults.
func (p HealPolicy) withDefaults() HealPolicy {
	d := defaultHealPolicy()
	if p.Initial <= 0 {
		p.Initial = d.Initial
	}
	if p.Max <= 0 {
		p.Max = max(d.Max, p.Initial)
	}
	if p.Horizon <= 0 {
		p.Horizon = d.Horizon
	}
	if p.Concurrency <= 0 {
		p.Concurrency = d.Concurrency
	}
	if p.SetupConcurrency <= 0 {
		p.SetupConcurrency = d.SetupConcurrency
	}
	p.SetupConcurrency = min(p.SetupConcurrency, p.Concurrency)
	if p.Timeout <= 0 {
		p.Timeout = d.Timeout
	}
	if p.StartDelay <= 0 {
		p.StartDelay = d.StartDelay
	}
	return p
}

// maxLastErrorLen bounds the error message a record keeps for operators.
const maxLastErrorLen = 1024

// markFailed updates the heal state of a record line after a failed DEL,
// on a copy: the old record's lines are never changed. It does so with
// healing off too: the state then tells operators
// ([Manager.PendingTeardowns]) and a manager started later with healing
// on, which resumes the retries.
func markFailed(a *cache.Attachment, o Outcome, pol HealPolicy, now time.Time, log *logrus.Entry) {
	h := &cache.Heal{Since: now}
	if a.Heal != nil {
		*h = *a.Heal
	}
	a.Heal = h
	h.Attempts++
	if o.Err != nil {
		h.LastError = truncate(o.Err.Error(), maxLastErrorLen)
	}
	if !h.GaveUp && pol.failed(h, now) {
		log.WithFields(logrus.Fields{
			"network": a.Network, "ifname": a.IfName, "attempts": h.Attempts, "since": h.Since,
		}).WithError(o.Err).Warn("Giving up retrying the DEL of an attachment; it stays recorded for GC")
	}
}

// truncate returns s cut to n bytes, marked when it was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// failed decides what follows a failed DEL whose retry state is h,
// after h.Attempts failures, the first at h.Since: the next retry, after
// the backoff, or, past the horizon, none (it reports that it gave up).
// It and backoff are the whole retry policy.
func (p HealPolicy) failed(h *cache.Heal, now time.Time) (gaveUp bool) {
	if now.Sub(h.Since) >= p.Horizon {
		h.GaveUp, h.Next = true, time.Time{}
		return true
	}
	h.Next = now.Add(p.backoff(h.Attempts))
	return false
}

// backoff returns the delay before retry number attempts+1.
func (p HealPolicy) backoff(attempts int) time.Duration {
	d := p.Initial
	for i := 1; i < attempts && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d - rand.N(d/5+1) //nolint:gosec // jitter, not security
}

// healer retries failed DELs in the background. The sandboxes with a
// pending retry, and when it is due, live in their order records (see
// [cache.Heal]); due is the in-memory schedule made from them, filled at
// start from every record and by every record write that leaves a retry
// pending. A retry takes only its sandbox's lock, never the gate, so it
// never delays another sandbox, and it is serialized with the runtime's
// own calls on its sandbox. While the node sets pods up (busy), retries
// run at most policy.SetupConcurrency at a time.
//
// mu is a leaf lock: never held while waiting for another lock or while a
// plugin runs.
type healer struct {
	policy HealPolicy
	log    *logrus.Entry
	retry  func(ctx context.Context, id string, link trace.SpanContext) // runs sandbox id's due retries; see detacher.retryDELs
	busy   func() bool                                                  // whether the node is setting pods up
	mu     sync.Mutex                                                   // guards the maps and queue
	due    map[string]time.Time                                         // sandbox ID -> when its next retry is due
	queue  healQueue                                                    // due's entries by time, and stale ones (see next)
	// since and links hold every sandbox whose record leaves a retry
	// pending, scheduled or running: when its first DEL failed, and the
	// span of the operation whose DEL failed last (invalid when unknown).
	since  map[string]time.Time
	links  map[string]trace.SpanContext
	wake   chan struct{}  // capacity 1: the schedule changed
	active bgwork.Tracker // retries in flight, which Shutdown waits for
	// unsettled are the DELs that ran but could not be committed (see
	// unsettled.go); its lock is a leaf, never taken with mu.
	unsettled unsettledSet
}

// healState is what a sandbox's order record leaves for healing: when
// its first pending retry is due (zero: none is pending) and when the
// earliest of its failed DELs was.
type healState struct {
	due, since time.Time
}

func newHealer(p HealPolicy, log *logrus.Entry, retry func(ctx context.Context, id string, link trace.SpanContext),
	busy func() bool,
) *healer {
	return &healer{
		policy: p, log: log, retry: retry, busy: busy,
		due: map[string]time.Time{}, since: map[string]time.Time{}, links: map[string]trace.SpanContext{},
		wake: make(chan struct{}, 1),
	}
}

// track takes in what sandbox id's record, just written, leaves for
// healing: a pending retry is scheduled (see [healer.schedule]), and
// with none pending the sandbox leaves the schedule. link is the span of
// the operation that wrote the record, which the retry's span links to.
func (h *healer) track(id string, st healState, link trace.SpanContext) {
	if h.policy.Disabled {
		return
	}
	if st.due.IsZero() {
		h.mu.Lock()
		delete(h.due, id)
		delete(h.since, id)
		delete(h.links, id)
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	h.since[id] = st.since
	if link.IsValid() {
		h.links[id] = link
	}
	h.mu.Unlock()
	h.schedule(id, st.due)
}

// pendingStats returns how many sandboxes have a retry pending, and how
// long ago the oldest of them first failed.
func (h *healer) pendingStats() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var oldest time.Time
	for _, t := range h.since {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		return len(h.since), 0
	}
	return len(h.since), time.Since(oldest)
}

// busyRecheck is how often a due retry held back by busy looks again: the
// end of the setups is no event, only a setup's begin is.
const busyRecheck = 50 * time.Millisecond

// limit returns how many retries may run at once now.
func (h *healer) limit() int {
	if h.busy != nil && h.busy() {
		return h.policy.SetupConcurrency
	}
	return h.policy.Concurrency
}

// schedule asks for a retry of sandbox id at the time at, or earlier if
// one is already scheduled earlier.
func (h *healer) schedule(id string, at time.Time) {
	if h.policy.Disabled {
		return
	}
	h.mu.Lock()
	if cur, ok := h.due[id]; !ok || at.Before(cur) {
		h.due[id] = at
		heap.Push(&h.queue, healAt{id: id, at: at})
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// next returns the sandbox whose retry is due first and when. Entries of
// the queue that due no longer holds (taken, or moved earlier) are
// dropped on the way.
func (h *healer) next() (string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.queue.Len() > 0 {
		top := h.queue[0]
		if at, ok := h.due[top.id]; ok && at.Equal(top.at) {
			return top.id, top.at
		}
		heap.Pop(&h.queue)
	}
	return "", time.Time{}
}

// healAt is one scheduled retry.
type healAt struct {
	id string
	at time.Time
}

// healQueue is a min-heap of retries by time, then sandbox ID.
type healQueue []healAt

func (q healQueue) Len() int { return len(q) }
func (q healQueue) Less(i, j int) bool {
	return q[i].at.Before(q[j].at) || q[i].at.Equal(q[j].at) && q[i].id < q[j].id
}
func (q healQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *healQueue) Push(x any)   { *q = append(*q, x.(healAt)) }
func (q *healQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// take takes sandbox id's retry off the schedule, to run it, and returns
// the span its own is to link to.
func (h *healer) take(id string) trace.SpanContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.due, id)
	return h.links[id]
}

// ran ends sandbox id's retry: when it scheduled none (a retry that
// found its record unreadable, or nothing due), the sandbox is no longer
// pending.
func (h *healer) ran(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.due[id]; !ok {
		delete(h.since, id)
		delete(h.links, id)
	}
}

// retrySource is where a healer finds the retries that records leave
// pending, whichever engine or process wrote them: the store.
type retrySource interface {
	// pendingRetries scans every record (see [sandboxStore.pendingRetries]).
	pendingRetries(log *logrus.Entry) map[string]healState
	// retriesMarked is when a record last came to leave a retry pending
	// (see [ledger.Ledger.RetriesMarked]).
	retriesMarked() time.Time
}

// adoptEvery is how often a running healer looks whether another engine
// or process recorded a retry (one stat of the mark): its policy's
// Initial, at most 2 s.
func (h *healer) adoptEvery() time.Duration { return min(h.policy.Initial, 2*time.Second) }

// adopt schedules every retry that the records leave pending when the
// mark moved past seen, and returns the mark; the records of retries
// that other engines and processes left are so read again.
func (h *healer) adopt(src retrySource, seen time.Time) time.Time {
	mark := src.retriesMarked()
	if !mark.After(seen) {
		return seen
	}
	pending := src.pendingRetries(h.log)
	for id, st := range pending {
		h.track(id, st, trace.SpanContext{})
	}
	if len(pending) > 0 && debugEnabled(h.log) {
		h.log.WithField("sandboxes", len(pending)).Debug("Adopted the DEL retries that the records leave pending")
	}
	return mark
}

// resume schedules the retries that the records leave pending (see
// [healer.run]), then waits for the policy's StartDelay; false when ctx
// ended first. It returns the retries' mark as it was before the scan.
func (h *healer) resume(ctx context.Context, src retrySource) (time.Time, bool) {
	mark := src.retriesMarked()
	resumed := src.pendingRetries(h.log)
	for id, st := range resumed {
		h.track(id, st, trace.SpanContext{})
	}
	if len(resumed) > 0 {
		h.log.WithField("sandboxes", len(resumed)).Info("Resuming background DEL retries")
	}
	start := time.NewTimer(h.policy.StartDelay)
	defer start.Stop()
	select {
	case <-start.C:
		return mark, true
	case <-ctx.Done():
		return mark, false
	}
}

// run schedules the retries that the records leave pending, waits for
// the policy's StartDelay, then runs retries as they fall due, at most
// h.limit() at a time, until ctx ends, and adopts those that other
// engines and processes record meanwhile (see [healer.adopt]). Retries
// in flight then finish within their own timeout; Shutdown waits for
// them.
func (h *healer) run(ctx context.Context, src retrySource) {
	seen, ok := h.resume(ctx, src)
	if !ok {
		return
	}
	seen = h.adopt(src, seen)
	adopt := time.NewTicker(h.adoptEvery())
	defer adopt.Stop()
	finished := make(chan struct{}, h.policy.Concurrency) // one send per retry, never blocking
	running := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		id, at := h.next()
		due := id != "" && !time.Now().Before(at)
		if due && running < h.limit() {
			link := h.take(id)
			running++
			h.active.Add()
			go func() {
				defer h.active.Done()
				defer func() { finished <- struct{}{} }()
				h.retry(ctx, id, link)
				h.ran(id)
			}()
			continue
		}
		var wait time.Duration
		switch {
		case due && running < h.policy.Concurrency:
			wait = busyRecheck // held back by setups only
		case due:
			wait = time.Hour // until a retry finishes
		case id != "":
			wait = time.Until(at)
		default:
			wait = time.Hour
		}
		timer.Reset(wait) // Go 1.23 timers: Reset leaves no stale tick to drain
		select {
		case <-timer.C:
		case <-finished:
			running--
		case <-h.wake:
		case <-adopt.C:
			seen = h.adopt(src, seen)
		case <-ctx.Done():
			return
		}
	}
}
