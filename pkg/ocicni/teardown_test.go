package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// faultFlag returns a path whose existence switches a recorder fault on.
func faultFlag(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	return p
}

// recordedBridge writes bridge+host-local followed by a recorder (so calls
// are logged), with optional recorder behaviour.
func (e *itEnv) recordedBridge(name string, recExtra map[string]any) {
	e.t.Helper()
	e.bridgeNet(name, "1.0.0", e.recorder(name, "1.0.0", recExtra))
}

func TestTeardownMiddleNetworkDELFails(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	e.recordedBridge("neta", nil)
	e.recordedBridge("netb", map[string]any{"del": map[string]any{"errorCode": 11, "errorMsg": "busy", "onlyIfExists": flag}})
	e.recordedBridge("netc", nil)
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "netb"}, {Name: "netc"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	pod.Networks = nil
	err = m.TearDownPodWithContext(e.ctx(), pod)
	failure := onlyFailure(t, err, "netb")
	assert.Equal(t, "eth1", failure.IfName)
	assert.Equal(t, RetryLater, failure.Class)
	assert.Contains(t, err.Error(), `"netb"`)
	var ce *types.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, uint(types.ErrTryAgainLater), ce.Code)

	assert.Equal(t, []string{"netc", "netb", "neta"}, e.callNetworks("DEL"), "every DEL ran, in reverse ADD order")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "netc"))
	assert.Len(t, testenv.Reservations(t, e.dataDir, "netb"), 1, "the failed chain halted before bridge's DEL")
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth2"))
	assert.Len(t, e.cacheFiles(), 1, "the failed attachment keeps its cache entry")

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "neta", "netb", "netc")
}

// addDelegateEntry makes a delegate-style cache entry: another libcni user
// attaches the same container's eth0 under its own network name.
func (e *itEnv) addDelegateEntry(pod PodNetwork, network, ifname string) {
	e.t.Helper()
	list, err := libcni.NetworkConfFromBytes([]byte(testenv.Conflist(network, "1.0.0", e.recorder(network, "1.0.0", nil))))
	require.NoError(e.t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, e.cacheDir, nil)
	_, err = cni.AddNetworkList(e.ctx(), list, &libcni.RuntimeConf{ContainerID: pod.ID, NetNS: pod.NetNS, IfName: ifname})
	require.NoError(e.t, err)
}

// duplicateIfnamePod sets up a pod on neta (eth0) and netb (net1), and
// adds a delegate's cache entry for the same container's eth0.
func (e *itEnv) duplicateIfnamePod() (*Manager, PodNetwork) {
	e.t.Helper()
	e.recordedBridge("neta", nil)
	e.recordedBridge("netb", nil)
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta", Ifname: "eth0"}, {Name: "netb", Ifname: "net1"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(e.t, err)
	e.addDelegateEntry(pod, "delegate", "eth0")
	require.Len(e.t, e.cacheFiles(), 3)
	return m, pod
}

// Each subtest sets up its own pod, so that none depends on another.
func TestTeardownToleratesDuplicateIfnamesInCache(t *testing.T) {
	t.Parallel()
	t.Run("status reports what this manager attached, not the delegate's entry", func(t *testing.T) {
		t.Parallel()
		e := newITEnv(t)
		m, pod := e.duplicateIfnamePod()
		status, err := m.GetPodNetworkStatusWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS})
		require.NoError(t, err)
		require.Len(t, status, 2)
		assert.Equal(t, NetAttachment{Name: "neta", Ifname: "eth0"}, status[0].NetAttachment)
	})
	t.Run("requested networks are never widened", func(t *testing.T) {
		t.Parallel()
		e := newITEnv(t)
		m, pod := e.duplicateIfnamePod()
		only := pod
		only.Networks = []NetAttachment{{Name: "netb", Ifname: "net1"}}
		require.NoError(t, m.TearDownPodWithContext(e.ctx(), only))
		assert.Equal(t, []string{"netb"}, e.callNetworks("DEL"))
		assert.NotNil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "neta stays attached")
		assert.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 1)
		assert.Empty(t, testenv.Reservations(t, e.dataDir, "netb"))
	})
	t.Run("all cached attachments get DEL, duplicates included", func(t *testing.T) {
		t.Parallel()
		e := newITEnv(t)
		m, pod := e.duplicateIfnamePod()
		all := pod
		all.Networks = nil
		require.NoError(t, m.TearDownPodWithContext(e.ctx(), all))
		assert.ElementsMatch(t, []string{"netb", "neta", "delegate"}, e.callNetworks("DEL"))
		e.assertClean(pod, "neta", "netb")
		warned := false
		for _, entry := range e.log.AllEntries() {
			if entry.Level == logrus.WarnLevel && entry.Data["ifname"] == "eth0" && entry.Data["networks"] != nil {
				warned = true
			}
		}
		assert.True(t, warned, "the duplicate is logged")
	})
}

func TestTeardownUsesCachedConfigAfterRemoval(t *testing.T) {
	t.Parallel()
	for _, keepOther := range []bool{true, false} {
		name := "conf dir empty"
		if keepOther {
			name = "other network remains"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.bridgeNet("net", "1.0.0")
			if keepOther {
				e.addConf("other", e.recorder("other", "1.0.0", nil))
			}
			m := e.start(WithReloadDebounce(time.Millisecond), withWatcher)
			pod := e.pod("p")
			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)

			files, _ := filepath.Glob(filepath.Join(e.confDir, "*-net.conflist"))
			require.Len(t, files, 1)
			require.NoError(t, os.Remove(files[0]))
			require.Eventually(t, func() bool { return !contains(m.Networks(), "net") }, 10*time.Second, 5*time.Millisecond)

			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "net")
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSetupRollback(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("good", nil)
	e.addConf("bad", e.recorder("bad", "1.0.0", map[string]any{"add": map[string]any{"errorCode": 7, "errorMsg": "no"}}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "bad"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	var se *SetupError
	require.ErrorAs(t, err, &se)
	assert.Nil(t, se.Rollback)
	requirePluginError(t, err, "bad", "ADD", 7)

	assert.Equal(t, []string{"bad", "good"}, e.callNetworks("DEL"), "DEL ran for the failed network too, then the earlier one")
	dels := e.calls("DEL")
	assert.Nil(t, dels[0].PrevResult(), "the failed ADD cached no result")
	assert.NotNil(t, dels[1].PrevResult(), "the rollback's DEL of an attachment that was added gets its cached result, as a teardown's does")
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
	e.assertClean(pod, "good")
}

// A teardown's DEL gets the result cached at ADD as prevResult, and libcni
// then removes the entry.
func TestTeardownPassesCachedResult(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("net", nil)
	m := e.start()
	pod := e.pod("p")
	e.setUp(pod)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS}))
	dels := e.calls("DEL")
	require.Len(t, dels, 1)
	prev := dels[0].PrevResult()
	require.NotNil(t, prev, "DEL got the cached result")
	assert.NotEmpty(t, prev["ips"], "the cached result is the ADD's, with its IP")
	e.assertClean(pod, "net")
}

func TestSetupRollbackRunsAfterContextExpired(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("good", nil)
	held := testenv.NewBarrier(t) // never released: the deadline kills the ADD
	e.addConf("slow", e.recorder("slow", "1.0.0", map[string]any{"add": held.Behaviour(nil)}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "good"}, {Name: "slow"}}
	ctx := newExpiringCtx()
	done := setUpAsync(ctx, m, pod)
	held.WaitEntered(t, 1)
	ctx.Expire()
	err := testenv.RequireDone(t, done, "SetUpPod after its deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrRollbackPending)
	m.e.rollbacks.Wait()
	assert.Equal(t, []string{"slow", "good"}, e.callNetworks("DEL"))
	e.assertClean(pod, "good")
}

func TestTolerantTeardown(t *testing.T) {
	t.Parallel()
	del := map[string]any{"del": map[string]any{"errorCode": 100, "errorMsg": "broken"}}
	cases := map[string]func(e *itEnv) []Option{
		"global option": func(e *itEnv) []Option {
			e.recordedBridge("flaky", del)
			return []Option{WithTeardownPolicy(Tolerant)}
		},
		"per-network key": func(e *itEnv) []Option {
			n := testenv.Alloc(e.t)
			list := testenv.BridgeConflist("flaky", "1.0.0", n, e.dataDir, e.recorder("flaky", "1.0.0", del))
			e.addConf("flaky", `{"ocicni.teardownPolicy":"tolerant",`+list[1:])
			return nil
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.recordedBridge("solid", nil)
			m := e.start(setup(e)...)
			pod := e.pod("p")
			pod.Networks = []NetAttachment{{Name: "solid"}, {Name: "flaky"}}
			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)

			pod.Networks = nil
			outcomes, err := m.TearDownPodOutcomes(e.ctx(), pod)
			require.NoError(t, err)
			require.Len(t, outcomes, 2)
			assert.Equal(t, "flaky", outcomes[0].Network)
			assert.Equal(t, Failed, outcomes[0].Class)
			assert.True(t, outcomes[0].Tolerated)
			assert.Equal(t, Deleted, outcomes[1].Class)
			assert.Empty(t, testenv.Reservations(t, e.dataDir, "solid"))
			files := e.cacheFiles()
			require.Len(t, files, 1, "the failed attachment's cache entry is kept")
			assert.Contains(t, files[0], "flaky-")
			logged := false
			for _, entry := range e.log.AllEntries() {
				if entry.Level == logrus.ErrorLevel && entry.Data["network"] == "flaky" && entry.Data[logrus.ErrorKey] != nil {
					logged = true
				}
			}
			assert.True(t, logged, "the tolerated failure is logged with its network and cause")
		})
	}
}

func TestTeardownIdempotentAndVanishedNetns(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.bridgeNet("net", "1.0.0")
	m := e.start()
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.NoError(t, netns.Remove(pod.NetNS))

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "net")
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "net")
}

func TestTeardownOrderIsReverseOfAddSurvivingRestart(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	for _, n := range []string{"zeta", "alpha", "mid"} {
		e.addConf(n, e.recorder(n, "1.0.0", nil))
	}
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "mid"}, {Name: "zeta"}, {Name: "alpha"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Equal(t, []string{"mid", "zeta", "alpha"}, e.callNetworks("ADD"))

	m = e.restart()
	pod.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	assert.Equal(t, []string{"alpha", "zeta", "mid"}, e.callNetworks("DEL"))
	e.assertClean(pod)
}

func TestTeardownWithoutConfigOrCacheIsAWarning(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	m := e.start()
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	pod.Networks = []NetAttachment{{Name: "neta", Ifname: "eth0"}, {Name: "unknown", Ifname: "eth1"}}
	outcomes, err := m.TearDownPodOutcomes(e.ctx(), pod)
	require.NoError(t, err, "an attachment nothing is known about is not an error")
	require.Len(t, outcomes, 2)
	assert.Equal(t, "unknown", outcomes[0].Network)
	assert.Equal(t, NoConfig, outcomes[0].Class)
	assert.Equal(t, Deleted, outcomes[1].Class, "the other attachment still got its DEL")
	e.assertClean(pod, "neta")
	warned := false
	for _, entry := range e.log.AllEntries() {
		warned = warned || (entry.Level == logrus.WarnLevel && entry.Data["network"] == "unknown")
	}
	assert.True(t, warned)
}

// A network whose only plugin answers DEL with code 3 is AlreadyGone, a
// success that keeps the plugin's error. (Code 3 inside a chain is
// TestCode3InsideAChain.)
func TestTeardownUnknownContainerCountsAsDeleted(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.recordedBridge("neta", nil)
	e.addConf("gone", e.recorder("gone", "1.0.0", map[string]any{"del": map[string]any{"errorCode": 3, "errorMsg": "no such container"}}))
	m := e.start()
	pod := e.pod("p")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "gone"}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	pod.Networks = nil
	outcomes, err := m.TearDownPodOutcomes(e.ctx(), pod)
	require.NoError(t, err, "code 3 is success")
	require.Len(t, outcomes, 2)
	assert.Equal(t, "gone", outcomes[0].Network)
	assert.Equal(t, AlreadyGone, outcomes[0].Class)
	var ce *types.Error
	require.ErrorAs(t, outcomes[0].Err, &ce)
	assert.Equal(t, uint(types.ErrUnknownContainer), ce.Code)
	assert.Empty(t, e.cacheFiles(), "its cache entry is removed like a deleted one")
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "neta"))
}

// A setup whose rollback failed leaves an attachment that libcni never
// cached; a later teardown that names only the sandbox ID (as after a
// runtime restart) still deletes it inside the netns recorded at ADD.
func TestTeardownOfUncachedAttachmentUsesRecordedNetns(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	m, pod, flag := e.failedRollbackPod()

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
	e.assertClean(pod, "neta")
}

// failedRollbackPod sets up a pod on "neta" (bridge+host-local, then a
// recorder) whose ADD fails at the recorder and whose rollback DEL fails at
// the recorder too, while the returned flag file exists: bridge's eth0 and
// its reservation are left, recorded in the order record but never cached.
func (e *itEnv) failedRollbackPod() (*Manager, PodNetwork, string) {
	t := e.t
	t.Helper()
	flag := faultFlag(t)
	e.recordedBridge("neta", map[string]any{
		"add": map[string]any{"errorMsg": "boom"},
		"del": map[string]any{"errorCode": 11, "onlyIfExists": flag},
	})
	m := e.start()
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	var se *SetupError
	require.ErrorAs(t, err, &se)
	require.NotNil(t, se.Rollback, "the rollback failed")
	order, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	require.Len(t, order, 1)
	assert.Equal(t, cache.Attachment{Network: "neta", IfName: "eth0", NetNS: pod.NetNS}, cache.Attachment{
		Network: order[0].Network, IfName: order[0].IfName, NetNS: order[0].NetNS,
	})
	assert.NotEmpty(t, order[0].Config, "the config it was added with is saved")
	require.NotNil(t, order[0].Heal, "the failed rollback DEL waits for a retry")
	assert.Equal(t, 1, order[0].Heal.Attempts)
	require.Empty(t, e.cacheFiles())
	require.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 1)
	require.NotNil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "bridge left eth0 behind")
	return m, pod, flag
}
