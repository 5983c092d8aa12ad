package ocicni

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowNet writes a recorder network whose ADD sleeps long enough for the
// test to act while it runs. The recorder logs the call before sleeping.
func slowNet(e *itEnv, name string) {
	e.addConf(name, e.recorder(name, "1.1.0", map[string]any{"add": map[string]any{"sleepMs": 1500}}))
}

// addsStarted reports how many ADDs the recorder has begun.
func addsStarted(e *itEnv) func() int { return func() int { return len(e.calls("ADD")) } }

func TestStatusAndReloadDoNotWaitForSlowADD(t *testing.T) {
	e := newITEnv(t)
	slowNet(e, "slow")
	m := e.start()
	pod := e.pod("slow")

	done := make(chan error, 1)
	go func() {
		_, err := m.SetUpPodWithContext(e.ctx(), pod)
		done <- err
	}()
	require.Eventually(t, func() bool { return addsStarted(e)() == 1 }, 10*time.Second, 5*time.Millisecond)

	// While the ADD sleeps: a reload with a new file, Status, and another
	// pod's validation all complete before the ADD does.
	e.addConf("late", e.recorder("late", "1.0.0", nil))
	m.reload(e.ctx())
	require.NoError(t, m.Status())
	assert.Contains(t, m.Networks(), "late")
	select {
	case err := <-done:
		t.Fatalf("ADD finished before Status returned (err=%v); the test proves nothing", err)
	default:
	}
	require.NoError(t, <-done)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
}

func TestDifferentPodsRunConcurrently(t *testing.T) {
	e := newITEnv(t)
	slowNet(e, "slow")
	m := e.start()
	pods := []PodNetwork{e.pod("a"), e.pod("b")}
	var wg sync.WaitGroup
	finished := make(chan struct{}, 2)
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.SetUpPodWithContext(e.ctx(), p)
			assert.NoError(t, err)
			finished <- struct{}{}
		}()
	}
	// Both ADDs start before either finishes.
	require.Eventually(t, func() bool { return addsStarted(e)() == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Empty(t, finished, "both ADDs were running at once")
	wg.Wait()
	for _, p := range pods {
		require.NoError(t, m.TearDownPodWithContext(e.ctx(), p))
	}
}

func TestSamePodIsSerializedAndLockWaitRespectsContext(t *testing.T) {
	e := newITEnv(t)
	slowNet(e, "slow")
	m := e.start()
	pod := e.pod("p")
	done := make(chan error, 1)
	go func() {
		_, err := m.SetUpPodWithContext(e.ctx(), pod)
		done <- err
	}()
	require.Eventually(t, func() bool { return addsStarted(e)() == 1 }, 10*time.Second, 5*time.Millisecond)

	// A teardown of the same pod waits for the lock; its context expires.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := m.TearDownPodWithContext(ctx, pod)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, e.calls("DEL"), "the waiting teardown ran no plugin")

	// Without a deadline it runs after the ADD.
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	require.NoError(t, <-done)
	adds, dels := e.calls("ADD"), e.calls("DEL")
	require.Len(t, dels, 1)
	assert.True(t, dels[0].Time.After(adds[0].Time.Add(time.Second)), "DEL ran after the slow ADD")
}
