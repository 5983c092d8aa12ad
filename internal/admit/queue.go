package admit

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Queue admits at most its bound of holders at a time, in arrival order.
// A holder that keeps its slot longer than the queue's overtime gives it
// back then (its work goes on, no longer counted), so that work which
// hangs, or waits on something other than the CPU, holds up the queue for
// at most that long. A nil *Queue admits everything at once, without
// waiting. The zero value is not usable: see [New].
//
// mu is a leaf: it is never held while waiting for anything.
type Queue struct {
	limit    int
	overtime time.Duration // 0: a slot is held until released
	mu       sync.Mutex    // guards running and waiters
	running  int           // slots held, including those just handed to a waiter
	waiters  list.List     // of *waiter, in arrival order
}

type waiter struct {
	ready chan struct{} // closed when the slot is this waiter's
}

// New returns a queue that admits at most limit holders at a time, each
// for at most overtime (zero: until it releases), or nil (admit
// everything) when limit is zero or less.
func New(limit int, overtime time.Duration) *Queue {
	if limit <= 0 {
		return nil
	}
	return &Queue{limit: limit, overtime: max(overtime, 0)}
}

// Limit returns the bound; zero for a nil queue.
func (q *Queue) Limit() int {
	if q == nil {
		return 0
	}
	return q.limit
}

// Overtime returns how long a holder may keep its slot (zero: until it
// releases); zero for a nil queue.
func (q *Queue) Overtime() time.Duration {
	if q == nil {
		return 0
	}
	return q.overtime
}

// Slot is one admission. Release it when the work is done; releasing it
// again, or after its overtime gave it back, does nothing.
type Slot struct {
	q     *Queue
	done  atomic.Bool
	timer *time.Timer // gives the slot back at overtime; nil without one
}

// grant returns a slot of q that is now held, and starts its overtime.
func (q *Queue) grant() *Slot {
	s := &Slot{q: q}
	if q.overtime > 0 {
		s.timer = time.AfterFunc(q.overtime, s.giveBack)
	}
	return s
}

// Acquire waits for a slot, behind every caller that came before it. When
// ctx ends first, it returns ctx.Err() and holds nothing. A nil queue
// returns a slot at once.
func (q *Queue) Acquire(ctx context.Context) (*Slot, error) {
	if q == nil {
		return &Slot{}, nil
	}
	q.mu.Lock()
	if q.running < q.limit && q.waiters.Len() == 0 {
		q.running++
		q.mu.Unlock()
		return q.grant(), nil
	}
	if err := ctx.Err(); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	w := &waiter{ready: make(chan struct{})}
	elem := q.waiters.PushBack(w)
	q.mu.Unlock()

	select {
	case <-w.ready:
		return q.grant(), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	select {
	case <-w.ready: // granted as ctx ended: pass it on
		q.mu.Unlock()
		(&Slot{q: q}).giveBack()
	default:
		q.waiters.Remove(elem)
		q.mu.Unlock()
	}
	return nil, ctx.Err()
}

// Release gives the slot to the first waiter, or back to the queue.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.giveBack()
}

func (s *Slot) giveBack() {
	if s.q == nil || s.done.Swap(true) {
		return
	}
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if front := q.waiters.Front(); front != nil {
		q.waiters.Remove(front)
		close(front.Value.(*waiter).ready) // the slot changes hands: running stays
		return
	}
	q.running--
}

// State is who holds and waits for a queue's slots.
type State struct {
	Running, Waiting int
}

// State reports the queue's holders and waiters, for tests and metrics.
func (q *Queue) State() State {
	if q == nil {
		return State{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return State{Running: q.running, Waiting: q.waiters.Len()}
}
