package ocicnitest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// brief reduces calls to what a runtime's test asserts on.
type brief struct {
	Verb, Network, Type, IfName, ContainerID, PodName string
}

func briefs(calls []ocicnitest.Call) []brief {
	out := make([]brief, len(calls))
	for i, c := range calls {
		out[i] = brief{c.Verb, c.Network, c.PluginType, c.IfName, c.ContainerID, c.Args["K8S_POD_NAME"]}
	}
	return out
}

// This is what a runtime's unit test looks like: the manager is built from
// the Env's options, and the pod goes through its whole life, without root.
func TestRuntimeUnitTestLifecycle(t *testing.T) {
	ctx := context.Background()
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.1.0", "bridge", "portmap")
	env.WriteConflist(t, "storage", "1.0.0", "macvlan")
	m := env.NewManager(t)
	require.Equal(t, "podnet", m.GetDefaultNetworkName(), "the network written first is the default")
	require.NoError(t, m.StatusWithContext(ctx))

	pod := ocicni.PodNetwork{
		Name: "web", Namespace: "shop", ID: "sandbox1", UID: "uid-1", NetNS: env.NetNS(t, "sandbox1"),
		Networks: []ocicni.NetAttachment{{Name: "podnet"}, {Name: "storage", Ifname: "stor0"}},
	}
	results, err := m.SetUpPodWithContext(ctx, pod)
	require.NoError(t, err)
	require.Len(t, results, 2)
	var ips []string
	for _, r := range results {
		iface, ipcs, err := ocicni.SandboxIPs(r)
		require.NoError(t, err)
		assert.Equal(t, r.Ifname, iface.Name)
		assert.Equal(t, pod.NetNS, iface.Sandbox)
		require.Len(t, ipcs, 1)
		ips = append(ips, ipcs[0].Address.String())
	}
	assert.Equal(t, []string{"10.88.0.2/16", "10.88.0.3/16"}, ips)
	assert.Equal(t, []string{pod.NetNS}, env.Exec.LoopbackUps(), "lo was set up in the pod's netns")

	status, err := m.GetPodNetworkStatusWithContext(ctx, pod)
	require.NoError(t, err)
	require.Len(t, status, 2)
	for i := range status {
		_, ipcs, err := ocicni.SandboxIPs(status[i])
		require.NoError(t, err)
		assert.Equal(t, ips[i], ipcs[0].Address.String(), "status reports the setup's IP")
	}

	require.NoError(t, m.TearDownPodWithContext(ctx, ocicni.PodNetwork{
		Name: pod.Name, Namespace: pod.Namespace, ID: pod.ID, UID: pod.UID, NetNS: pod.NetNS,
	}))
	listing, err := cache.New(env.CacheDir).ForContainer(pod.ID)
	require.NoError(t, err)
	assert.Empty(t, listing.Entries, "teardown removed the cache entries")

	require.NoError(t, m.GC(ctx, nil))

	assert.Equal(t, []brief{
		{"STATUS", "podnet", "bridge", "", "", ""},
		{"STATUS", "podnet", "portmap", "", "", ""},
		{"ADD", "podnet", "bridge", "eth0", "sandbox1", "web"},
		{"ADD", "podnet", "portmap", "eth0", "sandbox1", "web"},
		{"ADD", "storage", "macvlan", "stor0", "sandbox1", "web"},
		// No CHECK: the status right after the setup answers from the
		// ADD's results (see ocicni.WithStatusAlwaysChecks).
		// Reverse ADD order; a list's DEL runs its plugins last to first.
		{"DEL", "storage", "macvlan", "stor0", "sandbox1", "web"},
		{"DEL", "podnet", "portmap", "eth0", "sandbox1", "web"},
		{"DEL", "podnet", "bridge", "eth0", "sandbox1", "web"},
		// GC only at 1.1.0, once per plugin.
		{"GC", "podnet", "bridge", "", "", ""},
		{"GC", "podnet", "portmap", "", "", ""},
	}, briefs(env.Exec.Calls()))

	for _, c := range env.Exec.Calls("ADD", "CHECK", "DEL") {
		assert.Equal(t, map[string]string{
			"IgnoreUnknown": "1", "K8S_POD_NAMESPACE": "shop", "K8S_POD_NAME": "web",
			"K8S_POD_INFRA_CONTAINER_ID": "sandbox1", "K8S_POD_UID": "uid-1",
		}, c.Args, "%s", c)
		assert.Equal(t, pod.NetNS, c.NetNS, "%s", c)
		assert.Equal(t, c.Network, c.Config["name"], "%s", c)
	}
	gc := env.Exec.Calls("GC")[0]
	assert.Equal(t, []types.GCAttachment{}, gc.ValidAttachments(), "no valid pods: keep nothing")
	assert.Equal(t, "1.1.0", gc.Config["cniVersion"])
}

// A pod whose teardown failed with "try again later" is retried by the
// runtime once the plugin recovers; GC keeps what a valid pod owns.
func TestRuntimeUnitTestRetryAndGC(t *testing.T) {
	ctx := context.Background()
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.1.0", "bridge")
	m := env.NewManager(t)
	pods := make([]ocicni.PodNetwork, 3)
	for i := range pods {
		id := fmt.Sprintf("pod%d", i)
		pods[i] = ocicni.PodNetwork{Name: id, Namespace: "ns", ID: id, NetNS: env.NetNS(t, id)}
		_, err := m.SetUpPodWithContext(ctx, pods[i])
		require.NoError(t, err)
	}

	env.Exec.Fail("podnet", "DEL", &types.Error{Code: types.ErrTryAgainLater, Msg: "busy"})
	outcomes, err := m.TearDownPodOutcomes(ctx, pods[0])
	var terr *ocicni.TeardownError
	require.ErrorAs(t, err, &terr)
	require.Len(t, outcomes, 1)
	assert.Equal(t, ocicni.RetryLater, outcomes[0].Class)
	var perr *types.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, uint(types.ErrTryAgainLater), perr.Code)

	env.Exec.Clear("podnet", "DEL")
	env.Exec.ResetCalls()
	require.NoError(t, m.TearDownPodWithContext(ctx, pods[0]), "the retry succeeds")
	assert.Equal(t, []string{"DEL podnet eth0 pod0"}, callStrings(env.Exec.Calls()))

	// pod1 is still running; pod2 was removed behind the runtime's back.
	env.Exec.ResetCalls()
	require.NoError(t, m.GC(ctx, []*ocicni.PodNetwork{&pods[1]}))
	assert.Equal(t, []string{"DEL podnet eth0 pod2", "GC podnet"}, callStrings(env.Exec.Calls()))
	assert.Equal(t, []types.GCAttachment{{ContainerID: "pod1", IfName: "eth0"}},
		env.Exec.Calls("GC")[0].ValidAttachments())
}

func callStrings(calls []ocicnitest.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.String()
	}
	return out
}

// A failing ADD is rolled back, and the error reaches the plugin's code.
func TestSetupFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	env.WriteConflist(t, "extra", "1.0.0", "macvlan")
	m := env.NewManager(t)
	env.Exec.Fail("extra", "ADD", &types.Error{Code: types.ErrInternal, Msg: "no parent"})

	pod := ocicni.PodNetwork{
		Name: "p", Namespace: "ns", ID: "pod", NetNS: env.NetNS(t, "pod"),
		Networks: []ocicni.NetAttachment{{Name: "podnet"}, {Name: "extra"}},
	}
	_, err := m.SetUpPodWithContext(ctx, pod)
	var serr *ocicni.SetupError
	require.ErrorAs(t, err, &serr)
	var perr *types.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, "no parent", perr.Msg)
	assert.Equal(t, []string{"ADD podnet eth0 pod", "ADD extra eth1 pod", "DEL extra eth1 pod", "DEL podnet eth0 pod"},
		callStrings(env.Exec.Calls()))
}

// A hung ADD ends with the caller's deadline, and the rollback finishes
// in the background. The rollback's DEL hangs too until the setup has
// returned: a rollback that finished as the deadline passed is reported
// as finished, not pending.
func TestHungSetupRollsBackInBackground(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	m := env.NewManager(t)
	release := env.Exec.Hang("podnet", "ADD")
	t.Cleanup(release)
	releaseDEL := env.Exec.Hang("podnet", "DEL")
	t.Cleanup(releaseDEL)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := m.SetUpPodWithContext(ctx, ocicni.PodNetwork{Name: "p", Namespace: "ns", ID: "pod", NetNS: env.NetNS(t, "pod")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ocicni.ErrRollbackPending)
	require.Eventually(t, func() bool { return len(env.Exec.Calls("DEL")) == 1 }, 30*time.Second, 5*time.Millisecond,
		"the rollback's DEL runs in the background")
	releaseDEL()
	// The next operation on the pod waits for the rollback.
	require.NoError(t, m.TearDownPodWithContext(context.Background(), ocicni.PodNetwork{Name: "p", Namespace: "ns", ID: "pod"}))
}

// Status without a cached result reads the fake netns, which knows what
// the ADD reported; a netns that is gone fails status but not teardown.
func TestStatusFromFakeNetNS(t *testing.T) {
	ctx := context.Background()
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	env.Exec.Subnet("podnet", mustPrefix("192.0.2.0/24"))
	m := env.NewManager(t)
	pod := ocicni.PodNetwork{Name: "p", Namespace: "ns", ID: "pod", NetNS: env.NetNS(t, "pod")}
	_, err := m.SetUpPodWithContext(ctx, pod)
	require.NoError(t, err)
	require.NoError(t, cache.New(env.CacheDir).Remove("podnet", "pod", "eth0"))

	status, err := m.GetPodNetworkStatusWithContext(ctx, pod)
	require.NoError(t, err)
	require.Len(t, status, 1)
	iface, ips, err := ocicni.SandboxIPs(status[0])
	require.NoError(t, err)
	assert.Equal(t, "eth0", iface.Name)
	assert.Equal(t, "02:42:c0:00:02:02", iface.Mac)
	assert.Equal(t, "192.0.2.2/24", ips[0].Address.String())

	require.NoError(t, os.Remove(pod.NetNS))
	_, err = m.GetPodNetworkStatusWithContext(ctx, pod)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, m.TearDownPodWithContext(ctx, pod))
	assert.Equal(t, []string{"ADD podnet eth0 pod", "DEL podnet eth0 pod"}, callStrings(env.Exec.Calls()))
}

// Setup fails before any plugin runs when lo cannot be set up, and status
// fails while lo is down.
func TestLoopbackFailure(t *testing.T) {
	ctx := context.Background()
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	m := env.NewManager(t)
	boom := errors.New("no lo")
	env.Exec.FailLoopback(boom)
	pod := ocicni.PodNetwork{Name: "p", Namespace: "ns", ID: "pod", NetNS: env.NetNS(t, "pod")}
	_, err := m.SetUpPodWithContext(ctx, pod)
	require.ErrorIs(t, err, boom)
	assert.Empty(t, env.Exec.Calls())

	env.Exec.FailLoopback(nil)
	_, err = m.GetPodNetworkStatusWithContext(ctx, pod)
	require.ErrorContains(t, err, "loopback interface is down")
}

// The netns path is validated as in production.
func TestNetNSValidationKept(t *testing.T) {
	// "host" names this thread's namespace by pid and tid, which only the
	// host check refuses; the thread must live until the end.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	task, err := os.Readlink("/proc/thread-self")
	require.NoError(t, err)
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	m := env.NewManager(t)
	for name, ns := range map[string]string{
		"missing":     env.NetNSDir + "/missing",
		"relative":    "netns/pod",
		"host":        "/proc/" + task + "/ns/net",
		"per-process": "/proc/self/ns/net",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.SetUpPodWithContext(context.Background(), ocicni.PodNetwork{Name: "p", Namespace: "ns", ID: "pod", NetNS: ns})
			require.ErrorIs(t, err, ocicni.ErrInvalidArgument)
		})
	}
	assert.Empty(t, env.Exec.Calls())
	assert.Empty(t, env.Exec.LoopbackUps())
}

// Concurrent setups each get an address of their own.
func TestConcurrentSetups(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	m := env.NewManager(t)
	const n = 8
	ips := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("pod%d", i)
		ns := env.NetNS(t, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.SetUpPodWithContext(context.Background(), ocicni.PodNetwork{Name: id, Namespace: "ns", ID: id, NetNS: ns})
			if !assert.NoError(t, err) {
				return
			}
			_, ipcs, err := ocicni.SandboxIPs(res[0])
			if assert.NoError(t, err) {
				ips[i] = ipcs[0].Address.IP.String()
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ip := range ips {
		assert.False(t, seen[ip], "%s handed out twice", ip)
		seen[ip] = true
	}
	assert.Len(t, env.Exec.Calls("ADD"), n)
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
