package admit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueUp starts a waiter for q and returns once it waits in the queue,
// behind those before it; the returned channel gets its slot.
func queueUp(t *testing.T, q *Queue, ctx context.Context) <-chan *Slot {
	t.Helper()
	before := q.State().Waiting
	got := make(chan *Slot, 1)
	go func() {
		s, err := q.Acquire(ctx)
		if err != nil {
			close(got)
			return
		}
		got <- s
	}()
	require.Eventually(t, func() bool { return q.State().Waiting == before+1 }, 10*time.Second, time.Millisecond)
	return got
}

func TestQueueArrivalOrder(t *testing.T) {
	q := New(2, 0)
	a, err := q.Acquire(context.Background())
	require.NoError(t, err)
	b, err := q.Acquire(context.Background())
	require.NoError(t, err)
	assert.Equal(t, State{Running: 2}, q.State())

	var waiting []<-chan *Slot
	for range 5 {
		waiting = append(waiting, queueUp(t, q, context.Background()))
	}
	assert.Equal(t, State{Running: 2, Waiting: 5}, q.State())

	// Every release admits exactly the first waiter left.
	held := []*Slot{a, b}
	for i, w := range waiting {
		held[0].Release()
		held = held[1:]
		s := <-w
		require.NotNil(t, s, "waiter %d", i)
		for _, later := range waiting[i+1:] {
			select {
			case <-later:
				t.Fatalf("a later waiter was admitted before waiter %d", i)
			default:
			}
		}
		held = append(held, s)
		assert.Equal(t, State{Running: 2, Waiting: len(waiting) - i - 1}, q.State())
	}
	for _, s := range held {
		s.Release()
		s.Release() // a second release does nothing
	}
	assert.Equal(t, State{}, q.State())
}

func TestQueueNewcomerWaitsBehindWaiters(t *testing.T) {
	q := New(1, 0)
	a, err := q.Acquire(context.Background())
	require.NoError(t, err)
	first := queueUp(t, q, context.Background())
	a.Release()
	s := <-first
	require.NotNil(t, s)
	// A free slot is never taken past a waiter: the next newcomer queues.
	second := queueUp(t, q, context.Background())
	s.Release()
	s2 := <-second
	require.NotNil(t, s2)
	s2.Release()
	assert.Equal(t, State{}, q.State())
}

func TestQueueDeadlineLeavesNothing(t *testing.T) {
	q := New(1, 0)
	a, err := q.Acquire(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	gone := queueUp(t, q, ctx)
	kept := queueUp(t, q, context.Background())
	cancel()
	_, ok := <-gone
	assert.False(t, ok, "the waiter whose context ended got no slot")
	assert.Equal(t, State{Running: 1, Waiting: 1}, q.State())

	a.Release()
	s := <-kept
	require.NotNil(t, s, "the slot goes to the waiter behind the one that left")
	s.Release()
	assert.Equal(t, State{}, q.State())

	expired, cancel2 := context.WithCancel(context.Background())
	cancel2()
	s, err = q.Acquire(expired)
	require.NoError(t, err, "a free slot is taken even with an ended context: the caller checks its context")
	s.Release()
	b, err := q.Acquire(context.Background())
	require.NoError(t, err)
	_, err = q.Acquire(expired)
	require.ErrorIs(t, err, context.Canceled, "an ended context does not queue")
	b.Release()
	assert.Equal(t, State{}, q.State())
}

// TestQueueNoSlotLost races grants against waiters leaving: whatever the
// interleaving, the bound holds and every slot comes back.
func TestQueueNoSlotLost(t *testing.T) {
	const limit, callers = 3, 200
	q := New(limit, 0)
	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%3 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*time.Microsecond)
				defer cancel()
			}
			s, err := q.Acquire(ctx)
			if err != nil {
				return
			}
			n := inside.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			inside.Add(-1)
			s.Release()
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int32(limit))
	assert.Equal(t, State{}, q.State())
	for range limit { // every slot is free again
		_, err := q.Acquire(context.Background())
		require.NoError(t, err)
	}
}

func TestQueueOvertimeGivesBack(t *testing.T) {
	q := New(1, time.Millisecond)
	hung, err := q.Acquire(context.Background())
	require.NoError(t, err)
	// The holder never releases; its overtime passes the slot on.
	s, err := q.Acquire(context.Background())
	require.NoError(t, err)
	hung.Release() // late: does nothing
	s.Release()    // or late too, if its own overtime passed first
	assert.Equal(t, State{}, q.State())
}

func TestNilQueueAdmitsAll(t *testing.T) {
	q := New(0, 0)
	assert.Nil(t, q)
	assert.Zero(t, q.Limit())
	for range 100 {
		s, err := q.Acquire(context.Background())
		require.NoError(t, err)
		defer s.Release()
	}
	assert.Equal(t, State{}, q.State())
}

// BenchmarkAcquireRelease is what admission costs an operation that
// finds a free slot: the whole of its cost on a node without a burst.
func BenchmarkAcquireRelease(b *testing.B) {
	q := New(4, time.Second)
	ctx := context.Background()
	for b.Loop() {
		s, err := q.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}
