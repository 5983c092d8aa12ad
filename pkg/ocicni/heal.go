package ocicni

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
)

// HealPolicy tunes healing: the background retries of DELs that failed.
// A zero field takes its default. See [WithHealing].
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
	// Timeout bounds one retry of one sandbox (its DELs); 1 min by default.
	Timeout time.Duration
	// Disabled turns the background retries off (see [WithoutHealing]).
	Disabled bool
}

func defaultHealPolicy() HealPolicy {
	return HealPolicy{Initial: time.Second, Max: 5 * time.Minute, Horizon: 24 * time.Hour, Concurrency: 2, Timeout: time.Minute}
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
	if p.Timeout <= 0 {
		p.Timeout = d.Timeout
	}
	return p
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
// own calls on its sandbox.
//
// mu is a leaf lock: never held while waiting for another lock or while a
// plugin runs.
type healer struct {
	m      *Manager
	policy HealPolicy
	mu     sync.Mutex           // guards due and queue
	due    map[string]time.Time // sandbox ID -> when its next retry is due
	queue  healQueue            // due's entries by time, and stale ones (see next)
	wake   chan struct{}        // capacity 1: the schedule changed
	active bgwork.Tracker       // retries in flight, which Shutdown waits for
}

func newHealer(m *Manager, p HealPolicy) *healer {
	return &healer{m: m, policy: p, due: map[string]time.Time{}, wake: make(chan struct{}, 1)}
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

func (h *healer) take(id string) {
	h.mu.Lock()
	delete(h.due, id)
	h.mu.Unlock()
}

// run resumes the retries recorded by earlier managers, then runs retries
// as they fall due, at most policy.Concurrency at a time, until ctx ends.
// Retries in flight then finish within their own timeout; Shutdown waits
// for them.
func (h *healer) run(ctx context.Context) {
	h.resume()
	slots := make(chan struct{}, h.policy.Concurrency)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		id, at := h.next()
		if id != "" && !time.Now().Before(at) {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			h.take(id)
			h.active.Add()
			go func() {
				defer h.active.Done()
				defer func() { <-slots }()
				h.retry(ctx, id)
			}()
			continue
		}
		wait := time.Hour
		if id != "" {
			wait = time.Until(at)
		}
		timer.Reset(wait) // Go 1.23 timers: Reset leaves no stale tick to drain
		select {
		case <-timer.C:
		case <-h.wake:
		case <-ctx.Done():
			return
		}
	}
}

// resume schedules the pending retries found in the order records.
func (h *healer) resume() {
	ids, err := h.m.cache.ListOrders()
	if err != nil {
		h.m.log.WithError(err).Warn("Cannot list attachment order records; pending DEL retries resume at the next teardown or GC")
		return
	}
	n := 0
	for _, id := range ids {
		record, err := h.m.cache.ReadOrder(id)
		if err != nil {
			continue // GC reports unreadable records
		}
		if due, ok := earliestHeal(record); ok {
			h.schedule(id, due)
			n++
		}
	}
	if n > 0 {
		h.m.log.WithField("sandboxes", n).Info("Resuming background DEL retries")
	}
}

// retry runs the due DELs of sandbox id under its lock. The wait for the
// lock ends with ctx (Shutdown); the DELs run under the policy's timeout,
// and not under ctx, so that Shutdown lets a retry in flight finish.
func (h *healer) retry(ctx context.Context, id string) {
	unlock, err := h.m.pods.Lock(ctx, id)
	if err != nil {
		return // shutting down: the record keeps the retry for the next manager
	}
	defer unlock()
	log := h.m.log.WithFields(logrus.Fields{"sandbox": id, "verb": "DEL", "reason": reasonHeal})
	record, rerr := h.m.cache.ReadOrder(id)
	if rerr != nil {
		log.WithError(rerr).Warn("Cannot read the attachment order record of a sandbox with a pending DEL retry; leaving it to GC")
		return
	}
	now := time.Now()
	var due []*slot
	for i := len(record) - 1; i >= 0; i-- { // reverse ADD order
		a := &record[i]
		if hs := a.Heal; hs != nil && !hs.GaveUp && !now.Before(hs.Next) {
			due = append(due, &slot{NetAttachment: NetAttachment{Name: a.Network, Ifname: a.IfName}, rec: a})
		}
	}
	if len(due) == 0 {
		if at, ok := earliestHeal(record); ok { // a teardown or setup changed it meanwhile
			h.schedule(id, at)
		}
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.policy.Timeout)
	defer cancel()
	set := h.m.snapshot()
	pod := &PodNetwork{ID: id}
	plans := make([]*plan, 0, len(due))
	for _, s := range due {
		if e, err := h.m.cache.Get(s.Name, id, s.Ifname); err == nil {
			s.entry = e
		}
		p, err := h.m.planFor(pod, "", s, set, log)
		if err != nil { // cannot happen: the record's names were validated on read
			log.WithError(err).Warn("Cannot plan the DEL retry of a recorded attachment")
			continue
		}
		plans = append(plans, p)
	}
	outcomes := h.m.deleteAll(dctx, plans, log, reasonHeal)
	for _, o := range outcomes {
		if !o.Failure() {
			log.WithFields(logrus.Fields{"network": o.Network, "ifname": o.IfName}).
				Info("Background DEL retry finished a teardown")
		}
	}
	h.m.settle(id, record, nil, nil, plans, outcomes, log)
}
