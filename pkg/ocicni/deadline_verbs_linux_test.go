package ocicni

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// The caller's deadline is a promise for teardown, pod status and Status
// too: when a plugin hangs, the call returns with the deadline's error
// while the plugin is still held at its barrier (the default executor
// kills it), and nothing is lost: a later call does what the expired one
// could not. Each test expires its context only once the plugin is inside
// the verb, and checks that the barrier's release file did not exist yet
// when the call returned: the call did not wait for the plugin.

// runAsync runs fn in a goroutine and returns its error channel.
func runAsync(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// heldCall returns the one recorded call of verb on network, which is the
// call held at a barrier, and fails the test unless there is exactly one.
func heldCall(t *testing.T, e *itEnv, verb, network string) calllog.Call {
	t.Helper()
	var held []calllog.Call
	for _, c := range e.calls(verb) {
		if c.Network == network {
			held = append(held, c)
		}
	}
	require.Len(t, held, 1, "%s calls on %s", verb, network)
	return held[0]
}

// requireHeldWhenReturned fails the test if b was released before the
// call returned: the test releases it only after that.
func requireHeldWhenReturned(t *testing.T, b *testenv.Barrier) {
	t.Helper()
	require.NoFileExists(t, b.ReleaseFile, "the call returned while its plugin was still held")
}

// expireWhileHeld waits until the call running in done holds a plugin of
// network at barrier b in verb, lets ctx's deadline pass, and requires the
// call to return with the deadline's error while the plugin is still held,
// and that plugin to be killed. It returns the call's error.
func expireWhileHeld(t *testing.T, e *itEnv, b *testenv.Barrier, ctx *testenv.ExpiringContext, done <-chan error,
	verb, network, what string,
) error {
	t.Helper()
	b.WaitEntered(t, 1)
	plugin := heldCall(t, e, verb, network).PID
	ctx.Expire()
	err := testenv.RequireDone(t, done, what+" after its deadline")
	requireHeldWhenReturned(t, b)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	testenv.RequireGone(t, plugin, "the held "+verb+" plugin")
	return err
}

// A teardown whose DEL hangs returns at the deadline. The held DEL's
// attachment and every attachment whose DEL could not start after it are
// RetryLater and stay recorded (cache entry, order record, reservation);
// once the plugin answers, a retry deletes everything.
func TestTeardownDeadlineWhileDELHeld(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	e.recordedBridge("good", nil)
	// slow's recorder comes last in its list, so its DEL runs first, before
	// bridge and host-local.
	e.bridgeNet("slow", "1.0.0", e.recorder("slow", "1.0.0", map[string]any{"del": del.Behaviour(nil)}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "slow"}}
	e.setUp(pod)
	pod.Networks = nil

	ctx := newExpiringCtx()
	done := runAsync(func() error { return m.TearDownPodWithContext(ctx, pod) })
	err := expireWhileHeld(t, e, del, ctx, done, "DEL", "slow", "TearDownPod")
	var te *TeardownError
	require.ErrorAs(t, err, &te)
	failures := te.Failures()
	require.Len(t, failures, 2, "the held DEL, and good's, which could not start after the deadline")
	for i, network := range []string{"slow", "good"} {
		assert.Equal(t, network, failures[i].Network)
		assert.Equal(t, RetryLater, failures[i].Class, network)
		require.ErrorIs(t, failures[i].Err, context.DeadlineExceeded, network)
	}
	assert.Equal(t, []string{"slow"}, e.networksFor("DEL", pod.ID), "no DEL started after the deadline")

	// Nothing is lost: both attachments stay recorded.
	assert.Len(t, e.cacheFiles(), 2, "cache entries")
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	var recorded []string
	for _, a := range order {
		recorded = append(recorded, a.Network)
	}
	assert.ElementsMatch(t, []string{"good", "slow"}, recorded, "order record")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "good"), 1)
	assert.Len(t, testenv.Reservations(t, e.dataDir, "slow"), 1)

	del.Release(t)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod), "the retry")
	e.assertClean(pod, "good", "slow")
}

// A pod status whose CHECK hangs returns at the deadline with a
// NetworkError for the CHECK; the attachment is untouched, and status and
// teardown work once the plugin answers.
func TestPodStatusDeadlineWhileCHECKHeld(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	check := testenv.NewBarrier(t)
	e.bridgeNet("slow", "1.0.0", e.recorder("slow", "1.0.0", map[string]any{"check": check.Behaviour(nil)}))
	m := e.start(WithStatusAlwaysChecks())
	pod := e.pod("p")
	e.setUp(pod)

	ctx := newExpiringCtx()
	done := runAsync(func() error {
		_, err := m.GetPodNetworkStatusWithContext(ctx, pod)
		return err
	})
	err := expireWhileHeld(t, e, check, ctx, done, "CHECK", "slow", "GetPodNetworkStatus")
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "slow", ne.Network)
	assert.Equal(t, "CHECK", ne.Verb)

	assert.Len(t, e.cacheFiles(), 1, "cache entry")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "slow"), 1)
	assert.Empty(t, e.calls("DEL"), "status deletes nothing")

	check.Release(t)
	status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, status, 1)
	assert.Equal(t, "slow", status[0].Name)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "slow")
}

// Status whose STATUS verb hangs returns at the deadline with a
// NetworkError for the STATUS; once the plugin answers, Status succeeds.
func TestStatusDeadlineWhileSTATUSHeld(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	status := testenv.NewBarrier(t)
	e.addConf("slow", e.recorder("slow", "1.1.0", map[string]any{"status": status.Behaviour(nil)}))
	m := e.start()

	ctx := newExpiringCtx()
	done := runAsync(func() error { return m.StatusWithContext(ctx) })
	err := expireWhileHeld(t, e, status, ctx, done, "STATUS", "slow", "Status")
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "slow", ne.Network)
	assert.Equal(t, "STATUS", ne.Verb)

	status.Release(t)
	require.NoError(t, m.StatusWithContext(e.ctx()))
}

// A teardown that waits for the pod's lock, held by a setup whose ADD is
// held, returns at its own deadline without running a plugin, and leaves
// the lock's queue; the setup is not disturbed, and a later teardown
// deletes what it attached.
func TestTeardownLockWaitReturnsAtDeadline(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	add := testenv.NewBarrier(t)
	// The recorder comes last in the list: bridge and host-local have
	// attached by the time its ADD is held.
	e.bridgeNet("slow", "1.0.0", e.recorder("slow", "1.0.0", map[string]any{"add": add.Behaviour(nil)}))
	m := e.start()
	pod := e.pod("p")
	setup := setUpAsync(e.ctx(), m, pod)
	add.WaitEntered(t, 1)

	ctx := newExpiringCtx()
	teardown := runAsync(func() error { return m.TearDownPodWithContext(ctx, pod) })
	require.Eventually(t, func() bool { return podLockRefs(m, pod.ID) == 2 }, testenv.BarrierTimeout, 5*time.Millisecond,
		"the teardown waits for the pod's lock, which the setup holds")
	ctx.Expire()
	err := testenv.RequireDone(t, teardown, "TearDownPod waiting for the pod's lock after its deadline")
	requireHeldWhenReturned(t, add)

	require.ErrorIs(t, err, context.DeadlineExceeded)
	var te *TeardownError
	assert.NotErrorAs(t, err, &te, "no DEL ran")
	assert.Empty(t, e.calls("DEL"), "the teardown ran no plugin")
	assert.Equal(t, 1, podLockRefs(m, pod.ID), "the teardown left the lock's queue; the setup still holds it")
	testenv.RequirePending(t, setup, "the setup returned while its ADD was held")

	add.Release(t)
	require.NoError(t, testenv.RequireDone(t, setup, "SetUpPod"))
	assert.Len(t, testenv.Reservations(t, e.dataDir, "slow"), 1)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "slow")
}
