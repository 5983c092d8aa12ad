package ocicni_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// runs collects what the plugin hook reports.
type runs struct {
	mu   sync.Mutex
	list []ocicni.PluginRun
}

func (r *runs) hook(_ context.Context, run ocicni.PluginRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, run)
}

func (r *runs) of(verb string) []ocicni.PluginRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ocicni.PluginRun
	for _, x := range r.list {
		if x.Verb == verb {
			out = append(out, x)
		}
	}
	return out
}

// The hook sees every plugin run with its verb, network, plugin, container,
// ifname and error, and the plugin environment carries WithPluginEnv's
// variables. Runs without root through the test-support package.
func TestPluginHookAndEnv(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "net", "1.0.0", "bridge", "tuning")
	var got runs
	m := env.NewManager(t, ocicni.WithPluginHook(got.hook), ocicni.WithPluginEnv("GOMAXPROCS=2"),
		ocicni.WithStatusAlwaysChecks())
	pod := ocicni.PodNetwork{Name: "web", Namespace: "default", ID: "pod1", NetNS: env.NetNS(t, "pod1")}

	_, err := m.SetUpPodWithContext(context.Background(), pod)
	require.NoError(t, err)
	_, err = m.GetPodNetworkStatusWithContext(context.Background(), pod)
	require.NoError(t, err)
	env.Exec.Fail("net", "DEL", types.NewError(types.ErrTryAgainLater, "busy", ""))
	require.Error(t, m.TearDownPodWithContext(context.Background(), pod))

	adds := got.of("ADD")
	require.Len(t, adds, 2)
	for i, plugin := range []string{"bridge", "tuning"} {
		assert.Equal(t, ocicni.PluginRun{
			Verb: "ADD", Network: "net", Plugin: plugin, ContainerID: "pod1", IfName: "eth0",
			Duration: adds[i].Duration, Reason: "setup",
		}, adds[i])
	}
	dels := got.of("DEL")
	require.NotEmpty(t, dels)
	var ce *types.Error
	require.ErrorAs(t, dels[0].Err, &ce)
	assert.Equal(t, uint(types.ErrTryAgainLater), ce.Code)
	assert.Equal(t, "teardown", dels[0].Reason)
	checks := got.of("CHECK")
	require.Len(t, checks, 2, "a CHECK for each plugin of the list")
	for _, c := range checks {
		assert.Equal(t, "status", c.Reason, "%s", c.Plugin)
	}
	assert.NotEmpty(t, got.of("VERSION"), "VERSION runs are reported too")

	for _, c := range env.Exec.Calls("ADD", "DEL") {
		assert.Contains(t, c.Env, "GOMAXPROCS=2", "%s", c)
	}
}

func TestPluginEnvRejectsCNIKeys(t *testing.T) {
	for _, kv := range []string{"CNI_COMMAND=DEL", "NOEQUALS", "=x", "A=b\nc"} {
		_, err := ocicni.New(ocicni.WithPluginEnv(kv), ocicni.WithoutWatcher())
		require.ErrorIs(t, err, ocicni.ErrInvalidArgument, "%q", kv)
	}
	m, err := ocicni.New(ocicni.WithPluginHook(nil), ocicni.WithoutWatcher(), ocicni.WithConfDir(t.TempDir()))
	require.NoError(t, err, "nil means no hook, the default")
	require.NoError(t, m.Shutdown())
}

// ExampleWithPluginHook feeds plugin runs into counters, as a runtime
// would feed a Prometheus counter vector.
func ExampleWithPluginHook() {
	env, cleanup := exampleEnv() // one fake network, "podnet"
	defer cleanup()
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(_ context.Context, run ocicni.PluginRun) {
		mu.Lock()
		defer mu.Unlock()
		counts[fmt.Sprintf("verb=%s network=%s ok=%t", run.Verb, run.Network, run.Err == nil)]++
	}
	m, err := ocicni.New(env.Options(ocicni.WithPluginHook(count))...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()
	netns, err := ocicnitest.NewNetNS(env.NetNSDir, "pod1")
	if err != nil {
		panic(err)
	}
	pod := ocicni.PodNetwork{Name: "web", Namespace: "default", ID: "pod1", NetNS: netns}
	if _, err := m.SetUpPod(pod); err != nil {
		panic(err)
	}
	if err := m.TearDownPod(pod); err != nil {
		panic(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(counts["verb=ADD network=podnet ok=true"], counts["verb=DEL network=podnet ok=true"])
	// Output: 1 1
}
