package locks

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// gateAsync runs fn (a gate method) in a goroutine and returns its error
// channel.
func gateAsync(ctx context.Context, fn func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	return done
}

// waitGateWriters waits until n writers wait for g.
func waitGateWriters(t *testing.T, g *Gate, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.State().Waiting == n },
		testenv.BarrierTimeout, time.Millisecond, "%d writers wait for the gate", n)
}

// waitGateHolding waits until n writers hold back new readers of g.
func waitGateHolding(t *testing.T, g *Gate, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.State().Holding == n },
		testenv.BarrierTimeout, time.Millisecond, "%d writers hold back readers", n)
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
		g := NewGate(Patience{Idle: 0, Hold: time.Hour})
		require.NoError(t, g.RLock(bg)) // in flight
		locked := gateAsync(bg, g.Lock)
		waitGateHolding(t, g, 1)
		held := gateAsync(bg, g.RLock) // a new reader, held back
		testenv.RequirePending(t, locked, "the writer got in while a reader held the gate")
		g.RUnlock() // the one in flight finishes
		require.NoError(t, testenv.RequireDone(t, locked, "lock once the reader in flight finished"))
		testenv.RequirePending(t, held, "a reader got in while the writer held the gate")
		waitGateHolding(t, g, 0)
		g.Unlock()
		require.NoError(t, testenv.RequireDone(t, held, "the held-back reader, after the writer"))
		g.RUnlock()
	})
	t.Run("a hold ends while a reader in flight hangs", func(t *testing.T) {
		t.Parallel()
		g := NewGate(Patience{Idle: 5 * time.Millisecond, Hold: 5 * time.Millisecond})
		require.NoError(t, g.RLock(bg)) // in flight, and hung
		ctx, cancel := context.WithCancel(bg)
		locked := gateAsync(ctx, g.Lock)
		waitGateHolding(t, g, 1)
		for range 3 { // new readers get in between holds
			require.NoError(t, testenv.RequireDone(t, gateAsync(bg, g.RLock), "rlock while the writer waits"))
		}
		testenv.RequirePending(t, locked, "the writer got in while readers held the gate")
		cancel()
		require.ErrorIs(t, testenv.RequireDone(t, locked, "lock after its context ended"), context.Canceled)
		waitGateHolding(t, g, 0)
		for range 4 {
			g.RUnlock()
		}
	})
}

// gateState returns what holds g: its readers, and whether a writer does.
func gateState(g *Gate) (readers int, writer bool) {
	st := g.State()
	return st.Readers, st.Writer
}

// The gate prefers readers: a waiting writer holds back no reader, gets in once the readers have drained, and gives up
// when its context ends, leaving the gate as it found it. Every step
// waits for an event; nothing is proven by waiting a while.
func TestGate(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, g *Gate)
	}{{
		name: "a waiting writer does not block new readers",
		run: func(t *testing.T, g *Gate) {
			t.Helper()
			require.NoError(t, g.RLock(bg)) // a reader in flight
			locked := gateAsync(bg, g.Lock)
			waitGateWriters(t, g, 1)
			for range 3 { // new readers
				require.NoError(t, testenv.RequireDone(t, gateAsync(bg, g.RLock), "rlock behind a waiting writer"))
			}
			testenv.RequirePending(t, locked, "the writer got in while readers held the gate")
			for range 4 {
				g.RUnlock()
			}
			require.NoError(t, testenv.RequireDone(t, locked, "lock"))
			g.Unlock()
		},
	}, {
		name: "the writer gets in once the readers drain, and then excludes readers",
		run: func(t *testing.T, g *Gate) {
			t.Helper()
			require.NoError(t, g.RLock(bg))
			require.NoError(t, g.RLock(bg))
			locked := gateAsync(bg, g.Lock)
			waitGateWriters(t, g, 1)
			g.RUnlock()
			testenv.RequirePending(t, locked, "the writer got in while a reader held the gate")
			g.RUnlock()
			require.NoError(t, testenv.RequireDone(t, locked, "lock after the readers drained"))

			readers, writer := gateState(g)
			assert.Equal(t, 0, readers)
			assert.True(t, writer)
			ended, cancel := context.WithCancel(bg)
			cancel()
			require.ErrorIs(t, g.RLock(ended), context.Canceled, "a reader waits while the writer holds the gate")
			g.Unlock()
			require.NoError(t, g.RLock(ended), "a reader does not wait once the writer left")
			g.RUnlock()
		},
	}, {
		name: "a writer whose context ends gives up and leaves the gate usable",
		run: func(t *testing.T, g *Gate) {
			t.Helper()
			require.NoError(t, g.RLock(bg))
			ctx, cancel := context.WithCancel(bg)
			locked := gateAsync(ctx, g.Lock)
			waitGateWriters(t, g, 1)
			cancel()
			require.ErrorIs(t, testenv.RequireDone(t, locked, "lock after its context ended"), context.Canceled)
			waitGateWriters(t, g, 0)
			readers, writer := gateState(g)
			assert.Equal(t, 1, readers, "the reader still holds the gate")
			assert.False(t, writer)

			require.NoError(t, g.RLock(bg))
			g.RUnlock()
			g.RUnlock()
			require.NoError(t, testenv.RequireDone(t, gateAsync(bg, g.Lock), "lock of the idle gate"))
			g.Unlock()
		},
	}, {
		name: "a writer whose context has ended does not take even an idle gate",
		run: func(t *testing.T, g *Gate) {
			t.Helper()
			ctx, cancel := context.WithCancel(bg)
			cancel()
			require.ErrorIs(t, g.Lock(ctx), context.Canceled)
			readers, writer := gateState(g)
			assert.Equal(t, 0, readers)
			assert.False(t, writer)
			require.NoError(t, g.RLock(bg))
			g.RUnlock()
		},
	}, {
		name: "writers take the gate one at a time",
		run: func(t *testing.T, g *Gate) {
			t.Helper()
			require.NoError(t, g.Lock(bg))
			second := gateAsync(bg, g.Lock)
			waitGateWriters(t, g, 1)
			testenv.RequirePending(t, second, "a second writer got in while the first held the gate")
			g.Unlock()
			require.NoError(t, testenv.RequireDone(t, second, "the second lock"))
			g.Unlock()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewGate(Patience{Idle: time.Hour})
			tc.run(t, g)
			readers, writer := gateState(g)
			assert.Equal(t, 0, readers, "every reader released")
			assert.False(t, writer, "the writer released")
		})
	}
}
