package ocicni

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPodLocksSerializeOnePod(t *testing.T) {
	p := newPodLocks()
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := p.lock(context.Background(), "pod")
			assert.NoError(t, err)
			n := inside.Add(1)
			if n > maxInside.Load() {
				maxInside.Store(n)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			release()
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), maxInside.Load())
	assert.Empty(t, p.locks, "locks are dropped when unused")
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

func TestGateWriterExcludesReaders(t *testing.T) {
	g := newGate()
	require.NoError(t, g.rlock(context.Background()))
	require.NoError(t, g.rlock(context.Background()))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, g.lock(ctx), context.DeadlineExceeded, "writer waits for readers")

	locked := make(chan struct{})
	go func() {
		assert.NoError(t, g.lock(context.Background()))
		close(locked)
	}()
	// A waiting writer blocks new readers.
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting == 1
	}, time.Second, time.Millisecond)
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer rcancel()
	require.ErrorIs(t, g.rlock(rctx), context.DeadlineExceeded)

	g.runlock()
	g.runlock()
	<-locked
	g.unlock()
	require.NoError(t, g.rlock(context.Background()))
	g.runlock()
}
