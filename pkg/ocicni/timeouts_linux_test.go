package ocicni

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// Per-network timeouts (Timeouts): a network "slow" is bridge +
// host-local + a recorder whose plugin of one verb is held at a barrier,
// so that only a timeout ends that verb's runs. The caller's context has
// a deadline far beyond the bound (e.ctx()), except in the cases where
// the caller's deadline is the shorter one. Each case checks that the
// call returned while the plugin was still held, and that the plugin was
// killed.

// shortTimeout is the bound the tests give the held verb; the barrier
// outlasts any.
const shortTimeout = 300 * time.Millisecond

// timeoutSource is where the bound of one case comes from.
type timeoutSource struct {
	name string
	key  map[string]string // the network's TimeoutsKey, by verb; nil: none
	opt  Timeouts          // WithNetworkTimeouts; zero: not given
}

// timeoutSources are the ways of bounding verb to shortTimeout: the
// network's config alone, the manager's option alone, the config over a
// longer option, and the option for a verb the config leaves out.
func timeoutSources(verb string) []timeoutSource {
	short := func(d time.Duration) Timeouts {
		switch verb {
		case "add":
			return Timeouts{Add: d}
		case "del":
			return Timeouts{Del: d}
		}
		return Timeouts{Check: d}
	}
	other := "add"
	if verb == "add" {
		other = "del"
	}
	return []timeoutSource{
		{name: "config", key: map[string]string{verb: shortTimeout.String()}},
		{name: "option", opt: short(shortTimeout)},
		{name: "config over option", key: map[string]string{verb: shortTimeout.String()}, opt: short(time.Hour)},
		{name: "option for a verb the config leaves out", key: map[string]string{other: "1h"}, opt: short(shortTimeout)},
	}
}

// slowNet writes the network "slow" with the recorder's behaviour for the
// held verb, and the timeouts key when there is one.
func (e *itEnv) slowNet(key map[string]string, rec map[string]any) {
	e.t.Helper()
	var top map[string]any
	if key != nil {
		top = map[string]any{TimeoutsKey: key}
	}
	e.addConf("slow", e.gcConflist("slow", top, rec))
}

// requireTimedOut checks that err carries the network's own timeout for
// verb, which also matches context.DeadlineExceeded.
func requireTimedOut(t *testing.T, err error, verb string) {
	t.Helper()
	var te *TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, TimeoutError{Network: "slow", Verb: verb, Timeout: shortTimeout}, *te)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `network "slow": `+verb+" took longer than its timeout of 300ms")
}

// A timed-out ADD is rolled back like any failed one: the setup returns
// once the rollback is done, and nothing is left.
func TestNetworkTimeoutADD(t *testing.T) {
	t.Parallel()
	for _, src := range timeoutSources("add") {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			add := testenv.NewBarrier(t)
			e.slowNet(src.key, map[string]any{"add": add.Behaviour(nil)})
			m := e.start(WithNetworkTimeouts(src.opt))
			pod := e.pod("p")

			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			requireHeldWhenReturned(t, add)
			requireTimedOut(t, err, "ADD")
			testenv.RequireGone(t, heldCall(t, e, "ADD", "slow").PID, "the held ADD plugin")
			var se *SetupError
			require.ErrorAs(t, err, &se)
			assert.False(t, se.RollbackPending, "the caller's context did not end: the setup waited for the rollback")
			assert.Nil(t, se.Rollback, "the rollback succeeded")
			assert.Equal(t, []string{"slow"}, e.networksFor("DEL", pod.ID), "the rollback's DEL")
			e.assertClean(pod, "slow")
			add.Release(t)
		})
	}
}

// A timed-out DEL fails the teardown as RetryLater, and healing retries
// it in the background until it succeeds, with no other call.
func TestNetworkTimeoutDEL(t *testing.T) {
	t.Parallel()
	for _, src := range timeoutSources("del") {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			del := testenv.NewBarrier(t)
			e.slowNet(src.key, map[string]any{"del": del.Behaviour(nil)})
			m := e.start(WithNetworkTimeouts(src.opt), WithHealing(fastHeal))
			pod := e.pod("p")
			e.setUp(pod)

			err := m.TearDownPodWithContext(e.ctx(), pod)
			requireHeldWhenReturned(t, del)
			o := onlyFailure(t, err, "slow")
			assert.Equal(t, RetryLater, o.Class)
			requireTimedOut(t, o.Err, "DEL")
			testenv.RequireGone(t, e.callsFor("DEL", pod.ID)[0].PID, "the held DEL plugin")
			assert.Len(t, testenv.Reservations(t, e.dataDir, "slow"), 1, "the reservation stays until a DEL succeeds")

			del.Release(t)
			e.requireHealed(m, pod, "slow")
		})
	}
}

// A network's timeouts travel with its config: with the file gone, the
// config cached at ADD still bounds the DEL.
func TestNetworkTimeoutFromCachedConfig(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	del := testenv.NewBarrier(t)
	e.slowNet(map[string]string{"del": shortTimeout.String()}, map[string]any{"del": del.Behaviour(nil)})
	e.start()
	pod := e.pod("p")
	e.setUp(pod)
	files, err := os.ReadDir(e.confDir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NoError(t, os.Remove(e.confDir+"/"+files[0].Name()))
	m := e.restart()
	require.Empty(t, m.Networks(), "the network's file is gone")

	err = m.TearDownPodWithContext(e.ctx(), pod)
	requireHeldWhenReturned(t, del)
	o := onlyFailure(t, err, "slow")
	requireTimedOut(t, o.Err, "DEL")

	del.Release(t)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod), "the retry")
	e.assertClean(pod, "slow")
}

// A timed-out CHECK fails the pod's status with the CHECK's NetworkError
// and touches nothing; once the plugin answers, status and teardown work.
func TestNetworkTimeoutCHECK(t *testing.T) {
	t.Parallel()
	for _, src := range timeoutSources("check") {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			check := testenv.NewBarrier(t)
			e.slowNet(src.key, map[string]any{"check": check.Behaviour(nil)})
			m := e.start(WithNetworkTimeouts(src.opt), WithStatusAlwaysChecks())
			pod := e.pod("p")
			e.setUp(pod)

			_, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			requireHeldWhenReturned(t, check)
			requireTimedOut(t, err, "CHECK")
			var ne *NetworkError
			require.ErrorAs(t, err, &ne)
			assert.Equal(t, "CHECK", ne.Verb)
			testenv.RequireGone(t, heldCall(t, e, "CHECK", "slow").PID, "the held CHECK plugin")
			assert.Empty(t, e.calls("DEL"), "status deletes nothing")
			assert.Len(t, testenv.Reservations(t, e.dataDir, "slow"), 1)

			check.Release(t)
			_, err = m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err)
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "slow")
		})
	}
}

// When the caller's deadline is the shorter, it ends the verb: the error
// is the deadline's, not a *TimeoutError, and nothing is lost.
func TestNetworkTimeoutCallerShorter(t *testing.T) {
	t.Parallel()
	long := map[string]string{"add": "1h", "del": "1h", "check": "1h"}
	for _, verb := range []string{"ADD", "DEL", "CHECK"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			b := testenv.NewBarrier(t)
			rec := map[string]any{map[string]string{"ADD": "add", "DEL": "del", "CHECK": "check"}[verb]: b.Behaviour(nil)}
			e.slowNet(long, rec)
			m := e.start(WithStatusAlwaysChecks())
			pod := e.pod("p")
			if verb != "ADD" {
				e.setUp(pod)
			}

			ctx := newExpiringCtx()
			done := runAsync(func() error {
				var err error
				switch verb {
				case "ADD":
					_, err = m.SetUpPodWithContext(ctx, pod)
				case "DEL":
					err = m.TearDownPodWithContext(ctx, pod)
				default:
					_, err = m.GetPodNetworkStatusWithContext(ctx, pod)
				}
				return err
			})
			err := expireWhileHeld(t, e, b, ctx, done, verb, "slow", verb)
			var te *TimeoutError
			assert.NotErrorAs(t, err, &te, "the caller's deadline ended the verb")

			b.Release(t)
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod), "a later teardown (after a setup's rollback)")
			e.assertClean(pod, "slow")
		})
	}
}

// A bad timeouts key skips the file with a reason that names it and the
// value; a bad option is refused.
func TestNetworkTimeoutsInvalid(t *testing.T) {
	e := newLoaderEnv(t)
	file := writeConf(t, e.confDir, "10-tmo.conflist",
		`{"cniVersion":"1.0.0","name":"tmo","ocicni.timeouts":{"del":"ten"},"plugins":[{"type":"good"}]}`)
	m := e.manager(t)
	skipped := m.Skipped()
	require.Len(t, skipped, 1)
	require.ErrorIs(t, skipped[0], ErrInvalidConfig)
	assert.Equal(t, file, skipped[0].File)
	assert.Contains(t, skipped[0].Error(), `config file `+file+` (network "tmo") skipped`)
	assert.Contains(t, skipped[0].Error(), `ocicni.timeouts: "del": "ten" is not a duration above zero`)

	_, err := New(e.options(t, WithNetworkTimeouts(Timeouts{Check: -time.Second}))...)
	require.ErrorIs(t, err, ErrInvalidArgument)
}
