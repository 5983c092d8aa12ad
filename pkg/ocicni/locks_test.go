package ocicni

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// storeMax raises m to n unless it already holds more.
func storeMax(m *atomic.Int32, n int32) {
	for {
		cur := m.Load()
		if n <= cur || m.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Eight goroutines lock one pod. Each one that gets in announces itself
// and stays inside until the test lets it go, and the test does so only
// once every goroutine still out has registered for the lock: a lock that
// let a second one in would have it inside, with nothing but the lock
// between them, while the first one is held.
func TestPodLocksSerializeOnePod(t *testing.T) {
	const n = 8
	p := newPodLocks()
	var inside, maxInside atomic.Int32
	entered := make(chan struct{}, n)
	leave := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := p.lock(context.Background(), "pod")
			if !assert.NoError(t, err) {
				return
			}
			storeMax(&maxInside, inside.Add(1))
			entered <- struct{}{}
			<-leave
			inside.Add(-1)
			release()
		}()
	}
	for left := n; left > 0; left-- {
		require.Eventually(t, func() bool { return podLocksRefs(p, "pod") == left },
			testenv.BarrierTimeout, time.Millisecond, "%d goroutines hold or wait for the lock", left)
		select {
		case <-entered:
		case <-time.After(testenv.BarrierTimeout):
			require.FailNow(t, "nobody got the lock")
		}
		select {
		case <-entered:
			require.FailNow(t, "a second goroutine got in while the first was inside")
		default:
		}
		assert.Equal(t, int32(1), inside.Load())
		leave <- struct{}{}
	}
	wg.Wait()
	assert.Equal(t, int32(1), maxInside.Load())
	assert.Empty(t, p.locks, "locks are dropped when unused")
}

// podLocksRefs returns how many goroutines hold or wait for id's lock.
func podLocksRefs(p *podLocks, id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.locks[id]; l != nil {
		return l.refs
	}
	return 0
}

func TestPodLocksIndependentPodsAndContext(t *testing.T) {
	p := newPodLocks()
	releaseA, err := p.lock(context.Background(), "a")
	require.NoError(t, err)
	releaseB, err := p.lock(context.Background(), "b")
	require.NoError(t, err, "another pod is not blocked")
	releaseB()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.lock(ctx, "a")
	require.ErrorIs(t, err, context.Canceled)
	releaseA()
	assert.Empty(t, p.locks)
}

// gateAsync runs fn (a gate method) in a goroutine and returns its error
// channel.
func gateAsync(ctx context.Context, fn func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	return done
}

// waitGateWriters waits until n writers wait for g.
func waitGateWriters(t *testing.T, g *gate, n int) {
	t.Helper()
	waitGateCount(t, g, n, "writers wait for the gate", func() int { return g.waiting })
}

// waitGateHolding waits until n writers hold back new readers of g.
func waitGateHolding(t *testing.T, g *gate, n int) {
	t.Helper()
	waitGateCount(t, g, n, "writers hold back readers", func() int { return g.holding })
}

// waitGateCount waits until count, read under g's mutex, returns n.
func waitGateCount(t *testing.T, g *gate, n int, what string, count func() int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return count() == n
	}, testenv.BarrierTimeout, time.Millisecond, "%d %s", n, what)
}

// A writer that finds no idle moment within its patience holds back new
// readers while the ones in flight finish, and gets in; it never holds
// them back for longer than its hold, however long the readers in flight
// take. Every step waits for an event.
func TestGateHoldsBackReadersWithinBounds(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	t.Run("the writer gets in on a gate that is never idle", func(t *testing.T) {
		t.Parallel()
		g := newGate(gatePatience{idle: 0, hold: time.Hour})
		require.NoError(t, g.rlock(bg)) // in flight
		locked := gateAsync(bg, g.lock)
		waitGateHolding(t, g, 1)
		held := gateAsync(bg, g.rlock) // a new operation, held back
		requirePending(t, locked, "the writer got in while a reader held the gate")
		g.runlock() // the one in flight finishes
		require.NoError(t, requireDone(t, locked, "lock once the reader in flight finished"))
		requirePending(t, held, "a reader got in while the writer held the gate")
		waitGateHolding(t, g, 0)
		g.unlock()
		require.NoError(t, requireDone(t, held, "the held-back reader, after the writer"))
		g.runlock()
	})
	t.Run("a hold ends while a reader in flight hangs", func(t *testing.T) {
		t.Parallel()
		g := newGate(gatePatience{idle: 5 * time.Millisecond, hold: 5 * time.Millisecond})
		require.NoError(t, g.rlock(bg)) // in flight, and hung
		ctx, cancel := context.WithCancel(bg)
		locked := gateAsync(ctx, g.lock)
		waitGateHolding(t, g, 1)
		for range 3 { // new operations get in between holds
			require.NoError(t, requireDone(t, gateAsync(bg, g.rlock), "rlock while the writer waits"))
		}
		requirePending(t, locked, "the writer got in while readers held the gate")
		cancel()
		require.ErrorIs(t, requireDone(t, locked, "lock after its context ended"), context.Canceled)
		waitGateHolding(t, g, 0)
		for range 4 {
			g.runlock()
		}
	})
}

// gateState returns what holds g: its readers, and whether a writer does.
func gateState(g *gate) (readers int, writer bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readers, g.writer
}

// The gate prefers readers: a waiting writer (GC) holds back no reader (a
// pod operation), gets in once the readers have drained, and gives up
// when its context ends, leaving the gate as it found it. Every step
// waits for an event; nothing is proven by waiting a while.
func TestGate(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *gate)
	}{{
		name: "a waiting writer does not block new readers",
		run: func(t *testing.T, g *gate) {
			t.Helper()
			require.NoError(t, g.rlock(bg)) // an operation in flight
			locked := gateAsync(bg, g.lock)
			waitGateWriters(t, g, 1)
			for range 3 { // new operations, on other sandboxes
				require.NoError(t, requireDone(t, gateAsync(bg, g.rlock), "rlock behind a waiting writer"))
			}
			requirePending(t, locked, "the writer got in while readers held the gate")
			for range 4 {
				g.runlock()
			}
			require.NoError(t, requireDone(t, locked, "lock"))
			g.unlock()
		},
	}, {
		name: "the writer gets in once the readers drain, and then excludes readers",
		run: func(t *testing.T, g *gate) {
			t.Helper()
			require.NoError(t, g.rlock(bg))
			require.NoError(t, g.rlock(bg))
			locked := gateAsync(bg, g.lock)
			waitGateWriters(t, g, 1)
			g.runlock()
			requirePending(t, locked, "the writer got in while a reader held the gate")
			g.runlock()
			require.NoError(t, requireDone(t, locked, "lock after the readers drained"))

			readers, writer := gateState(g)
			assert.Equal(t, 0, readers)
			assert.True(t, writer)
			ended, cancel := context.WithCancel(bg)
			cancel()
			require.ErrorIs(t, g.rlock(ended), context.Canceled, "a reader waits while the writer holds the gate")
			g.unlock()
			require.NoError(t, g.rlock(ended), "a reader does not wait once the writer left")
			g.runlock()
		},
	}, {
		name: "a writer whose context ends gives up and leaves the gate usable",
		run: func(t *testing.T, g *gate) {
			t.Helper()
			require.NoError(t, g.rlock(bg))
			ctx, cancel := context.WithCancel(bg)
			locked := gateAsync(ctx, g.lock)
			waitGateWriters(t, g, 1)
			cancel()
			require.ErrorIs(t, requireDone(t, locked, "lock after its context ended"), context.Canceled)
			waitGateWriters(t, g, 0)
			readers, writer := gateState(g)
			assert.Equal(t, 1, readers, "the reader still holds the gate")
			assert.False(t, writer)

			require.NoError(t, g.rlock(bg))
			g.runlock()
			g.runlock()
			require.NoError(t, requireDone(t, gateAsync(bg, g.lock), "lock of the idle gate"))
			g.unlock()
		},
	}, {
		name: "a writer whose context has ended does not take even an idle gate",
		run: func(t *testing.T, g *gate) {
			t.Helper()
			ctx, cancel := context.WithCancel(bg)
			cancel()
			require.ErrorIs(t, g.lock(ctx), context.Canceled)
			readers, writer := gateState(g)
			assert.Equal(t, 0, readers)
			assert.False(t, writer)
			require.NoError(t, g.rlock(bg))
			g.runlock()
		},
	}, {
		name: "writers take the gate one at a time",
		run: func(t *testing.T, g *gate) {
			t.Helper()
			require.NoError(t, g.lock(bg))
			second := gateAsync(bg, g.lock)
			waitGateWriters(t, g, 1)
			requirePending(t, second, "a second writer got in while the first held the gate")
			g.unlock()
			require.NoError(t, requireDone(t, second, "the second lock"))
			g.unlock()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGate(gatePatience{idle: time.Hour})
			tc.run(t, g)
			readers, writer := gateState(g)
			assert.Equal(t, 0, readers, "every reader released")
			assert.False(t, writer, "the writer released")
		})
	}
}
