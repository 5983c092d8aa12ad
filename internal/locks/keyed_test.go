package locks

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

// Eight goroutines lock one key. Each one that gets in announces itself
// and stays inside until the test lets it go, and the test does so only
// once every goroutine still out has registered for the lock: a lock that
// let a second one in would have it inside, with nothing but the lock
// between them, while the first one is held.
func TestKeyedSerializesOneKey(t *testing.T) {
	const n = 8
	p := NewKeyed()
	var inside, maxInside atomic.Int32
	entered := make(chan struct{}, n)
	leave := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := p.Lock(context.Background(), "key")
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
		require.Eventually(t, func() bool { return p.Refs("key") == left },
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

func TestKeyedIndependentKeysAndContext(t *testing.T) {
	p := NewKeyed()
	releaseA, err := p.Lock(context.Background(), "a")
	require.NoError(t, err)
	releaseB, err := p.Lock(context.Background(), "b")
	require.NoError(t, err, "another key is not blocked")
	releaseB()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Lock(ctx, "a")
	require.ErrorIs(t, err, context.Canceled)
	releaseA()
	assert.Empty(t, p.locks)
}
