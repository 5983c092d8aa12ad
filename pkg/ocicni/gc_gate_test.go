//go:build !nogctests

package ocicni

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// gcVerbErrors returns, by network, the cause of every GC *NetworkError
// that err joins, and requires that err joins nothing else.
func gcVerbErrors(t *testing.T, err error) map[string]error {
	t.Helper()
	var joined interface{ Unwrap() []error }
	require.ErrorAs(t, err, &joined)
	out := map[string]error{}
	for _, e := range joined.Unwrap() {
		var ne *NetworkError
		require.ErrorAs(t, e, &ne)
		require.Equal(t, "GC", ne.Verb)
		out[ne.Network] = ne.Err
	}
	return out
}

// waitGCForGate waits until GC waits for the gate exclusively.
func waitGCForGate(t *testing.T, m *Manager) {
	t.Helper()
	require.Eventually(t, func() bool { return gateWriters(m) == 1 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"GC waits for the gate")
}

// The scenario. Pod X's setup fails on its second network, and the
// rollback's DEL on its first network is held, so X holds the gate shared
// for as long as its plugins take. GC waits for the gate to send its
// verbs; meanwhile pod Y is set up, on X's network or another, and waits
// neither for X's plugins nor for GC beyond GC's bounded hold (see gate).
// Once X is released, GC sends its verbs, with Y's attachment valid.
func TestGCWaitingForGateHoldsBackNoPod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yNet string }{
		{name: "same network", yNet: "neta"},
		{name: "another network", yNet: "netb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			rollbackHeld := testenv.NewBarrier(t)
			e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"del": rollbackHeld.Behaviour(nil)}))
			e.addConf("bad", e.recorder("bad", "1.0.0", map[string]any{"add": map[string]any{"errorMsg": "boom"}}))
			e.addConf("netb", e.gcConflist("netb", nil, nil))
			m := e.start()
			ctx := e.ctx()

			x := e.pod("x")
			x.Networks = []NetAttachment{{Name: "neta"}, {Name: "bad"}}
			setupX := setUpAsync(ctx, m, x)
			rollbackHeld.WaitEntered(t, 1)
			require.Equal(t, []string{x.ID}, enteredIDs(t, rollbackHeld), "X's rollback DEL on neta is held")

			gc := gcAsync(ctx, m, []*PodNetwork{})
			waitGCForGate(t, m)

			y := e.pod("y")
			y.Networks = []NetAttachment{{Name: tc.yNet}}
			require.NoError(t, testenv.RequireDone(t, setUpAsync(ctx, m, y), "Y's setup while X is held and GC waits"))
			ipY := testenv.AddrsIn(t, y.NetNS, "eth0")
			require.Len(t, ipY, 1)
			testenv.RequirePending(t, setupX, "X's setup returned while its rollback DEL was held")
			testenv.RequirePending(t, gc, "GC returned while X held the gate")
			assert.Empty(t, e.calls("GC"), "no GC verb while X's rollback is in flight")

			released := time.Now()
			rollbackHeld.Release(t)
			var se *SetupError
			require.ErrorAs(t, testenv.RequireDone(t, setupX, "X's setup"), &se)
			assert.Nil(t, se.Rollback, "X's rollback succeeded")
			require.NoError(t, testenv.RequireDone(t, gc, "GC"))

			gcs := e.calls("GC")
			require.ElementsMatch(t, []string{"neta", "netb"}, e.callNetworks("GC"), "one GC verb per 1.1.0 network")
			for _, c := range gcs {
				assert.True(t, c.Time.After(released), "GC verb on %s ran after X was released", c.Network)
				if c.Network == tc.yNet {
					assert.Contains(t, stdinValidAttachments(t, c), gcAttachment(y.ID, "eth0"), "Y is valid for the GC verb")
				}
			}
			for _, n := range []string{"neta", "netb"} {
				var want []string
				if n == tc.yNet {
					want = []string{reservation(t, ipY[0])}
				}
				assert.Equal(t, want, testenv.Reservations(t, e.dataDir, n),
					"%s: host-local's GC kept Y's address, X's rollback released X's", n)
			}
			assert.Empty(t, e.callsFor("DEL", y.ID), "GC deleted nothing of Y")

			y.Networks = nil
			require.NoError(t, m.TearDownPodWithContext(ctx, y))
			e.assertClean(y, "neta", "netb")
			e.assertClean(x, "neta", "netb")
		})
	}
}

// GC whose deadline passes while a pod operation holds the gate returns
// at once, says for each network that it skipped the verb, and sends none;
// the gate stays usable, and the next GC sends the verbs.
func TestGCSkipsVerbsWhenItsDeadlinePassesWaitingForGate(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	addHeld := testenv.NewBarrier(t)
	e.addConf("neta", e.poolConflistWith("neta", map[string]any{"add": addHeld.Behaviour(nil)}))
	e.addConf("netb", e.gcConflist("netb", nil, nil))
	m := e.start()
	ctx := e.ctx()

	held := e.pod("held")
	held.Networks = []NetAttachment{{Name: "neta"}}
	setup := setUpAsync(ctx, m, held)
	addHeld.WaitEntered(t, 1)

	gcCtx := newExpiringCtx()
	gc := gcAsync(gcCtx, m, []*PodNetwork{&held})
	waitGCForGate(t, m)
	gcCtx.Expire()
	err := testenv.RequireDone(t, gc, "GC after its deadline")
	require.ErrorIs(t, err, ErrGCVerbsSkipped)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	byNet := gcVerbErrors(t, err)
	require.Len(t, byNet, 2, "one error per network that should have had the verb: %v", err)
	for _, n := range []string{"neta", "netb"} {
		require.ErrorIs(t, byNet[n], ErrGCVerbsSkipped, n)
		require.ErrorIs(t, byNet[n], context.DeadlineExceeded, n)
	}
	assert.Empty(t, e.calls("GC"), "no GC verb was sent")
	assert.Zero(t, gateWriters(m), "GC no longer waits for the gate")
	testenv.RequirePending(t, setup, "the held setup returned")

	addHeld.Release(t)
	require.NoError(t, testenv.RequireDone(t, setup, "SetUpPod"))
	held.Networks = nil
	require.NoError(t, m.GC(ctx, []*PodNetwork{&held}), "the next GC sends the verbs")
	assert.ElementsMatch(t, []string{"neta", "netb"}, e.callNetworks("GC"))
	assert.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 1, "the held pod's address survived host-local's GC")
	require.NoError(t, m.TearDownPodWithContext(ctx, held))
	e.assertClean(held, "neta", "netb")
}

// The GC verbs run with the gate held exclusively (so no ADD runs while a
// plugin collects), and within the caller's deadline: a verb still running
// when it passes is killed, the networks after it are skipped, and the gate
// is released for pods.
func TestGCVerbsRunExclusiveWithinDeadline(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	verbHeld := testenv.NewBarrier(t)
	e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"gc": verbHeld.Behaviour(nil)}))
	e.addConf("netb", e.gcConflist("netb", nil, nil))
	m := e.start()
	ctx := e.ctx()

	gcCtx := newExpiringCtx()
	gc := gcAsync(gcCtx, m, []*PodNetwork{})
	verbHeld.WaitEntered(t, 1)
	readers, writer := gateState(m.e.gate)
	assert.True(t, writer, "GC holds the gate exclusively while a plugin collects")
	assert.Zero(t, readers)
	gcCtx.Expire()
	err := testenv.RequireDone(t, gc, "GC after its deadline, with a GC verb held")
	byNet := gcVerbErrors(t, err)
	require.Len(t, byNet, 2, "%v", err)
	require.ErrorIs(t, byNet["neta"], context.DeadlineExceeded, "neta's verb was cut short")
	require.NotErrorIs(t, byNet["neta"], ErrGCVerbsSkipped, "neta's verb was sent")
	require.ErrorIs(t, byNet["netb"], ErrGCVerbsSkipped)
	assert.Equal(t, []string{"neta"}, e.callNetworks("GC"), "netb got no verb")
	_, writer = gateState(m.e.gate)
	assert.False(t, writer, "GC released the gate")

	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "netb"}}
	e.setUp(pod)
	require.NoError(t, m.TearDownPodWithContext(ctx, pod))
}

// The verbs' own bound: once it has passed, every network left is skipped
// with the bound as the cause, and no plugin runs.
func TestGCVerbsBound(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	e.addConf("netb", e.gcConflist("netb", nil, nil))
	m := e.start()
	set := m.e.snapshot()
	targets := gcTargets(set)
	require.Equal(t, []string{"neta", "netb"}, targets)

	errs := m.gc.sendGCVerbs(e.ctx(), 0, set, targets, newValidSet())
	byNet := gcVerbErrors(t, errors.Join(errs...))
	require.Len(t, byNet, 2)
	for _, n := range targets {
		require.ErrorIs(t, byNet[n], ErrGCVerbsSkipped, n)
		require.ErrorIs(t, byNet[n], errGCVerbsBound, n)
		require.ErrorIs(t, byNet[n], context.DeadlineExceeded, n)
	}
	assert.Empty(t, e.calls("GC"))
}

// GC's stale DELs leave a quarter of its deadline, up to
// gcVerbReserveMax, to its GC verbs, and nothing without a deadline or
// without a network to send a verb to.
func TestVerbsReserved(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		verbs    bool
		want     time.Duration // after now; 0: none
	}{
		{name: "CRI-O's 30 s", deadline: 30 * time.Second, verbs: true, want: 30*time.Second - 7500*time.Millisecond},
		{name: "long deadline", deadline: 10 * time.Minute, verbs: true, want: 10*time.Minute - gcVerbReserveMax},
		{name: "no verbs", deadline: 30 * time.Second},
		{name: "no deadline", verbs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.deadline))
				defer cancel()
			}
			got := verbsReserved(ctx, now, tc.verbs)
			if tc.want == 0 {
				assert.True(t, got.IsZero(), "%v", got)
				return
			}
			assert.Equal(t, now.Add(tc.want), got)
		})
	}
}

// A GC whose stale DELs cannot finish before its deadline (each hangs)
// still sends its GC verbs before it, on an idle node and on one where
// pods are set up and torn down without a pause: at the reserve the DELs
// in flight are cut short and the others do not start, each a RetryLater
// outcome that names the reserve, and nothing is lost: once the plugin
// answers, the next GC deletes them.
func TestGCKeepsTimeForItsVerbs(t *testing.T) {
	t.Parallel()
	for _, busy := range []bool{false, true} {
		name := "idle node"
		if busy {
			name = "busy node"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			delHeld := testenv.NewBarrier(t)
			e.addConf("neta", e.gcConflist("neta", nil, map[string]any{"del": delHeld.Behaviour(nil)}))
			e.addConf("netb", e.gcConflist("netb", nil, nil))
			// A short gate patience: the busy node's setups overlap
			// without a pause, and GC holds them back for a while.
			m := e.start(func(o *options) error {
				o.gatePatience = locks.Patience{Idle: 100 * time.Millisecond, Hold: 200 * time.Millisecond}
				return nil
			})
			ctx := e.ctx()
			var stale []PodNetwork
			for i := range 3 {
				pod := e.pod(fmt.Sprintf("stale%d", i))
				pod.Networks = []NetAttachment{{Name: "neta"}}
				e.setUp(pod)
				stale = append(stale, pod)
			}

			stop := make(chan struct{})
			type cycles struct {
				n   int
				err error
			}
			workers := make(chan cycles, 2)
			if busy {
				for w := range 2 {
					go func() {
						n, err := podCycles(ctx, e, m, fmt.Sprintf("w%d", w), stop)
						workers <- cycles{n, err}
					}()
				}
			}
			gcCtx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			outcomes, err := m.GCOutcomes(gcCtx, []*PodNetwork{})
			close(stop)
			if busy {
				for range 2 {
					w := <-workers
					require.NoError(t, w.err)
					assert.Positive(t, w.n, "pods were set up and torn down while GC ran")
				}
			}
			require.NotErrorIs(t, err, ErrGCVerbsSkipped, "both networks got their verb")
			assert.ElementsMatch(t, []string{"neta", "netb"}, e.callNetworks("GC"))
			require.Len(t, outcomes, 3, "one per stale sandbox")
			for _, o := range outcomes {
				assert.Equal(t, RetryLater, o.Class, o.ContainerID)
				require.ErrorIs(t, o.Err, errGCVerbReserve, o.ContainerID)
			}
			delHeld.Release(t)
			require.NoError(t, m.GC(ctx, []*PodNetwork{}), "the next GC")
			for _, pod := range stale {
				e.assertClean(pod, "neta")
			}
		})
	}
}

// podCycles sets pods up on netb and tears them down, one after the
// other, until stop closes, and returns how many it set up.
func podCycles(ctx context.Context, e *itEnv, m *Manager, tag string, stop <-chan struct{}) (int, error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return i, nil
		default:
		}
		pod := PodNetwork{Name: tag, Namespace: "test", UID: tag, ID: fmt.Sprintf("ctr-%s-%d", tag, i), NetNS: testenv.NewNS(e.t)}
		pod.Networks = []NetAttachment{{Name: "netb"}}
		if _, err := m.SetUpPodWithContext(ctx, pod); err != nil {
			return i, err
		}
		if err := m.TearDownPodWithContext(ctx, pod); err != nil {
			return i, err
		}
	}
}
