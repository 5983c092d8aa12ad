package ocicni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// fastHeal retries within milliseconds, so that tests wait for events,
// not for the production backoff.
var fastHeal = HealPolicy{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond, StartDelay: time.Millisecond}

// healRuns collects the plugin runs the hook reports.
type healRuns struct {
	mu   sync.Mutex
	list []PluginRun
}

func (r *healRuns) hook(_ context.Context, run PluginRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, run)
}

// count returns how many runs of verb for container id had reason why.
func (r *healRuns) count(verb, id, why string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.list {
		if x.Verb == verb && x.ContainerID == id && x.Reason == why {
			n++
		}
	}
	return n
}

// failingDELNet writes a bridge+host-local network followed by a recorder
// whose DEL fails with code 11 while the returned flag file exists.
func (e *itEnv) failingDELNet(name string) string {
	e.t.Helper()
	flag := faultFlag(e.t)
	e.recordedBridge(name, map[string]any{"del": map[string]any{"errorCode": 11, "errorMsg": "busy", "onlyIfExists": flag}})
	return flag
}

// runtimeGivesUp does what CRI-O does after a failed teardown: it removes
// the sandbox's cache files by hand and the netns, and never calls again.
func (e *itEnv) runtimeGivesUp(pod PodNetwork) {
	e.t.Helper()
	files, err := filepath.Glob(filepath.Join(e.cacheDir, "results", "*"+pod.ID+"*"))
	require.NoError(e.t, err)
	require.NotEmpty(e.t, files)
	for _, f := range files {
		require.NoError(e.t, os.Remove(f))
	}
	require.NoError(e.t, netns.Remove(pod.NetNS))
}

// requireHealed waits until nothing of the pod is left on the host:
// no reservation, cache entry, order record or pending teardown.
func (e *itEnv) requireHealed(m *Manager, pod PodNetwork, network string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		order, err := m.diskCache().ReadOrder(pod.ID)
		return err == nil && order == nil
	}, time.Minute, 10*time.Millisecond, "the background retry removes the order record")
	assert.Empty(e.t, testenv.Reservations(e.t, e.dataDir, network), "host-local released the address")
	assert.Empty(e.t, e.cacheFiles())
	pending, err := m.PendingTeardowns()
	require.NoError(e.t, err)
	assert.Empty(e.t, pending)
}

// The runtime-gives-up sequence: DEL fails with code 11, the runtime drops
// its cache files and the netns, the fault clears, and no call follows.
// The manager's background retry finishes the teardown, from the config
// saved with the order record, and the hook shows it.
func TestHealFinishesTeardownWithoutAnotherCall(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := e.failingDELNet("flaky")
	var runs healRuns
	m := e.start(WithHealing(fastHeal), WithPluginHook(runs.hook))
	pod := e.pod("p")
	e.setUp(pod)

	err := m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS})
	assert.Equal(t, RetryLater, onlyFailure(t, err, "flaky").Class)
	e.runtimeGivesUp(pod)
	require.Eventually(t, func() bool { return runs.count("DEL", pod.ID, reasonHeal) >= 2 }, time.Minute, 10*time.Millisecond,
		"retries run while the fault lasts")
	pending, err := m.PendingTeardowns()
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "flaky", pending[0].Network)
	assert.Equal(t, "eth0", pending[0].IfName)
	assert.GreaterOrEqual(t, pending[0].Attempts, 2)
	assert.Contains(t, pending[0].LastError, "busy")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "flaky"), 1, "the failed chain kept its address")

	require.NoError(t, os.Remove(flag))
	e.requireHealed(m, pod, "flaky")
	assert.Positive(t, runs.count("DEL", pod.ID, reasonHeal))
	assert.Equal(t, 1, runs.count("DEL", pod.ID, reasonTeardown), "the runtime's one teardown stopped at the recorder, the first DEL of the chain")
	healed := false
	for _, entry := range e.log.AllEntries() {
		if entry.Level == logrus.InfoLevel && entry.Message == "Background DEL retry finished a teardown" {
			healed = true
		}
	}
	assert.True(t, healed, "the heal is logged at Info")
}

// The same after a restart: the manager that saw the failure is gone
// before any retry, and a new one on the same cache dir resumes the retry
// with no call at all.
func TestHealResumesInANewManager(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := e.failingDELNet("flaky")
	m := e.start() // healing off, as a process killed before any retry
	pod := e.pod("p")
	e.setUp(pod)
	require.Error(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	e.runtimeGivesUp(pod)
	require.NoError(t, m.Shutdown())
	pending, err := m.PendingTeardowns()
	require.NoError(t, err)
	require.Len(t, pending, 1, "the record keeps the retry")
	assert.Equal(t, 1, pending[0].Attempts)
	m.e.healer.mu.Lock()
	assert.Empty(t, m.e.healer.due, "without healing nothing is scheduled")
	m.e.healer.mu.Unlock()

	require.NoError(t, os.Remove(flag))
	var runs healRuns
	m = e.start(WithHealing(fastHeal), WithPluginHook(runs.hook))
	e.requireHealed(m, pod, "flaky")
	assert.Positive(t, runs.count("DEL", pod.ID, reasonHeal))
}

// A DEL that never succeeds is retried no more often than the backoff
// allows, and the retries stop at the horizon.
func TestHealBackoffBoundsRetries(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.failingDELNet("broken")
	var runs healRuns
	pol := HealPolicy{Initial: 20 * time.Millisecond, Max: 160 * time.Millisecond, Horizon: 1500 * time.Millisecond, StartDelay: time.Millisecond}
	m := e.start(WithHealing(pol), WithPluginHook(runs.hook))
	pod := e.pod("p")
	e.setUp(pod)
	start := time.Now()
	require.Error(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))

	// The recorder is the first plugin to get DEL and the one that fails:
	// one run per retry. How many fit before the horizon depends on how
	// fast the machine runs them; the backoff bounds them from above.
	require.Eventually(t, func() bool {
		pending, err := m.PendingTeardowns()
		return err == nil && len(pending) == 1 && pending[0].GaveUp
	}, time.Minute, 10*time.Millisecond, "retries stop at the horizon")
	elapsed := time.Since(start)
	n := runs.count("DEL", pod.ID, reasonHeal)
	assert.Positive(t, n, "retried before giving up")
	assert.LessOrEqual(t, n, maxRetries(pol, elapsed), "retries within %v", elapsed)
	assert.Len(t, testenv.Reservations(t, e.dataDir, "broken"), 1, "the attachment stays recorded for GC")
	m.e.healer.mu.Lock()
	_, scheduled := m.e.healer.due[pod.ID]
	m.e.healer.mu.Unlock()
	assert.False(t, scheduled, "nothing is scheduled after giving up")
	warns := 0
	for _, entry := range e.log.AllEntries() {
		if entry.Level == logrus.WarnLevel && entry.Data["network"] == "broken" && entry.Data["attempts"] != nil {
			warns++
		}
	}
	assert.Equal(t, 1, warns, "the give-up is logged once at Warn")
}

// maxRetries is the most retries that the backoff allows within d after
// the first failure: the k-th retry comes no earlier than the sum of the
// first k delays, each at least four fifths of its nominal value.
func maxRetries(p HealPolicy, d time.Duration) int {
	var sum time.Duration
	for k := 1; ; k++ {
		nominal := min(p.Initial<<(k-1), p.Max)
		sum += nominal - nominal/5
		if sum > d {
			return k - 1
		}
	}
}

func TestMaxRetries(t *testing.T) {
	p := HealPolicy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{7 * time.Millisecond, 0},
		{8 * time.Millisecond, 1},
		{24 * time.Millisecond, 2}, // 8 + 16
		{56 * time.Millisecond, 3}, // + 32
		{88 * time.Millisecond, 4}, // + 32 (capped)
		{119 * time.Millisecond, 4},
	} {
		assert.Equal(t, tc.want, maxRetries(p, tc.d), "%v", tc.d)
	}
}

func TestHealBackoff(t *testing.T) {
	p := HealPolicy{Initial: time.Second, Max: 5 * time.Minute}.withDefaults()
	for _, tc := range []struct {
		attempts int
		nominal  time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{9, 256 * time.Second},
		{10, 5 * time.Minute},
		{1000, 5 * time.Minute},
	} {
		for range 20 {
			d := p.backoff(tc.attempts)
			assert.LessOrEqual(t, d, tc.nominal, "attempt %d", tc.attempts)
			assert.GreaterOrEqual(t, d, tc.nominal-tc.nominal/5, "attempt %d", tc.attempts)
		}
	}
}

// A teardown by the runtime while a retry holds the sandbox waits for it:
// never two DELs at once for one attachment.
func TestHealAndRuntimeTeardownNeverOverlap(t *testing.T) {
	t.Parallel()
	e, m, pod, b, flag := heldRetry(t)

	done := make(chan error, 1)
	go func() { done <- m.TearDownPodWithContext(context.Background(), PodNetwork{ID: pod.ID}) }()
	require.Eventually(t, func() bool { return podLockWaiters(m, pod.ID) == 2 }, time.Minute, time.Millisecond,
		"the runtime's teardown waits for the sandbox's lock")
	assert.Equal(t, 1, b.Inside(t), "no second DEL while the retry runs")
	require.NoError(t, os.Remove(flag))
	b.Release(t)
	require.NoError(t, <-done)
	e.requireHealed(m, pod, "flaky")
}

// heldRetry sets up a pod whose teardown fails, then lets one retry fall
// due and holds it inside the recorder's DEL, the first of the chain.
func heldRetry(t *testing.T) (*itEnv, *Manager, PodNetwork, *testenv.Barrier, string) {
	t.Helper()
	e := newITEnv(t)
	flag := faultFlag(t)
	b := testenv.NewBarrier(t)
	e.recordedBridge("flaky", map[string]any{"del": b.Behaviour(map[string]any{
		"errorCode": 11, "errorMsg": "busy", "onlyIfExists": flag,
	})})
	m := e.start(WithHealing(HealPolicy{Initial: time.Hour, StartDelay: time.Millisecond})) // retries fall due only when the test says
	pod := e.pod("p")
	e.setUp(pod)
	b.Release(t) // the runtime's own DEL passes the barrier, and fails
	require.Error(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	b.Rearm(t)
	makeDue(t, m, pod.ID)
	b.WaitEntered(t, 1)
	return e, m, pod, b, flag
}

// makeDue makes the pending retries of sandbox id due now, as if their
// backoff had passed.
func makeDue(t *testing.T, m *Manager, id string) {
	t.Helper()
	record, err := m.diskCache().ReadOrder(id)
	require.NoError(t, err)
	now := time.Now()
	for _, a := range record {
		if a.Heal != nil {
			a.Heal.Next = now
		}
	}
	require.NoError(t, m.diskCache().WriteOrder(id, record))
	m.e.healer.schedule(id, now)
}

// podLockWaiters returns how many holders and waiters the lock of id has.
func podLockWaiters(m *Manager, id string) int { return m.e.pods.Refs(id) }

// A setup of the same sandbox ID cancels its pending retries: the record
// it writes has none, and a retry that falls due runs no DEL.
func TestHealCancelledBySetupOfSameID(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := e.failingDELNet("flaky")
	e.recordedBridge("other", nil)
	var runs healRuns
	m := e.start(WithHealing(HealPolicy{Initial: time.Hour, StartDelay: time.Millisecond}), WithPluginHook(runs.hook))
	pod := e.pod("p")
	e.setUp(pod)
	require.Error(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	pending, err := m.PendingTeardowns()
	require.NoError(t, err)
	require.Len(t, pending, 1)

	// The runtime creates the sandbox again, in a new netns, here on
	// another network (flaky's eth0 still holds the address).
	again := pod
	again.NetNS = testenv.NewNS(t)
	again.Networks = []NetAttachment{{Name: "other", Ifname: "net1"}}
	e.setUp(again)
	pending, err = m.PendingTeardowns()
	require.NoError(t, err)
	assert.Empty(t, pending, "the setup cancelled the retry")
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	require.Len(t, order, 2)
	assert.Equal(t, "other", order[0].Network)
	assert.Equal(t, "flaky", order[1].Network, "the earlier attachment stays recorded for teardown and GC")
	m.teardown.retryDELs(context.Background(), pod.ID, trace.SpanContext{}) // as if it fell due now
	assert.Zero(t, runs.count("DEL", pod.ID, reasonHeal), "the retry ran no DEL")

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	e.assertClean(pod, "flaky", "other")
	e.assertClean(again, "flaky", "other")
}

// Shutdown waits for a retry in flight, which finishes within its own
// bound, and stops the loop.
func TestShutdownWaitsForHealRetry(t *testing.T) {
	t.Parallel()
	_, m, pod, b, flag := heldRetry(t)

	stopped := make(chan struct{})
	go func() {
		_ = m.Shutdown()
		close(stopped)
	}()
	// Shutdown has stopped the loop and is blocked, or has returned.
	closed := func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}
	require.Eventually(t, func() bool { return closed() || parkedIn("(*Manager).Shutdown") }, time.Minute, time.Millisecond)
	require.False(t, closed(), "Shutdown returned while a retry ran")
	require.Error(t, m.ctx.Err(), "the loop is stopped")
	require.NoError(t, os.Remove(flag))
	b.Release(t)
	<-stopped
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	assert.Nil(t, order, "the retry in flight finished the teardown")
}

// The process that saw the teardown fail is killed with SIGKILL; a new
// manager on the same cache dir, given no call, finishes the teardown.
func TestHealResumesAfterKill(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := e.failingDELNet("flaky")
	e.start()
	pod := e.pod("p")
	e.setUp(pod)
	require.NoError(t, e.m.Shutdown())

	job := crashJob{ConfDir: e.confDir, CacheDir: e.cacheDir, BinDir: pluginDir, Verb: "teardown", Pod: PodNetwork{ID: pod.ID}}
	h := startHelper(t, job)
	h.waitFor(t, h.finished)
	require.Contains(t, h.result(), "busy", "the helper's teardown failed")
	h.kill(t, true)
	e.runtimeGivesUp(pod)

	require.NoError(t, os.Remove(flag))
	var runs healRuns
	m := e.start(WithHealing(fastHeal), WithPluginHook(runs.hook))
	e.requireHealed(m, pod, "flaky")
	assert.Positive(t, runs.count("DEL", pod.ID, reasonHeal))
}

// The schedule hands out retries by time, then sandbox ID, each once, and
// a retry moved earlier goes at its new time.
func TestHealScheduleOrder(t *testing.T) {
	h := newHealer(HealPolicy{}, nil, nil, nil)
	t0 := time.Unix(1000, 0)
	h.schedule("c", t0.Add(3*time.Second))
	h.schedule("a", t0.Add(2*time.Second))
	h.schedule("b", t0.Add(2*time.Second))
	h.schedule("d", t0.Add(5*time.Second))
	h.schedule("d", t0.Add(1*time.Second)) // earlier: moves
	h.schedule("a", t0.Add(9*time.Second)) // later: stays
	var got []string
	for {
		id, at := h.next()
		if id == "" {
			break
		}
		got = append(got, fmt.Sprintf("%s@%d", id, at.Sub(t0)/time.Second))
		h.take(id)
	}
	assert.Equal(t, []string{"d@1", "a@2", "b@2", "c@3"}, got)
	h.schedule("a", t0)
	id, _ := h.next()
	assert.Equal(t, "a", id, "a taken retry can be scheduled again")
}

// While the node sets pods up, retries run SetupConcurrency at a time;
// once it stops, they run Concurrency at a time, without any new event.
func TestHealYieldsToSetups(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	checks := make(chan int, 64) // sandboxes still scheduled, at each check of busy
	var h *healer
	started := make(chan string, 3)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
	h = newHealer(HealPolicy{Concurrency: 2, StartDelay: time.Millisecond}.withDefaults(), logrus.NewEntry(logrus.New()),
		func(_ context.Context, id string, _ trace.SpanContext) {
			started <- id
			<-release[id]
		},
		func() bool {
			h.mu.Lock()
			n := len(h.due)
			h.mu.Unlock()
			select {
			case checks <- n:
			default:
			}
			return busy.Load()
		})
	require.Equal(t, 1, h.policy.SetupConcurrency)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx, fixedRetries{"a": {due: time.Unix(1, 0)}, "b": {due: time.Unix(1, 0)}, "c": {due: time.Unix(1, 0)}})
	}()
	t.Cleanup(func() {
		cancel()
		for _, ch := range release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		<-done
		h.active.Wait()
	})
	wait := func(what string) string {
		t.Helper()
		select {
		case id := <-started:
			return id
		case <-time.After(10 * time.Second):
			require.FailNow(t, "no retry started", what)
			return ""
		}
	}
	first := wait("first retry, busy")
	assert.Equal(t, "a", first)
	// Two more checks of busy after the first start: the loop went round
	// and was held back, and no second sandbox was taken meanwhile.
	for range 3 {
		select {
		case n := <-checks:
			assert.GreaterOrEqual(t, n, 2, "a second retry was taken while setups ran")
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the loop did not look at busy again")
		}
	}
	select {
	case id := <-started:
		require.FailNow(t, "a second retry started while setups ran", id)
	default:
	}
	busy.Store(false)
	assert.Equal(t, "b", wait("second retry, setups over, the first still running"))
	close(release["a"])
	assert.Equal(t, "c", wait("third retry, after the first finished"))
}

// fixedRetries is a retrySource whose records leave the same retries
// pending at every scan, and that is never marked.
type fixedRetries map[string]healState

func (f fixedRetries) pendingRetries(*logrus.Entry) map[string]healState { return f }
func (fixedRetries) retriesMarked() time.Time                            { return time.Time{} }
