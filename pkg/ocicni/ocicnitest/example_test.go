package ocicnitest_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// newExampleEnv is what NewEnv(t) does in a test: examples have no t.
func newExampleEnv() (env *ocicnitest.Env, cleanup func()) {
	root, err := os.MkdirTemp("", "ocicnitest-example-")
	if err != nil {
		panic(err)
	}
	env, err = ocicnitest.NewEnvAt(root)
	if err != nil {
		panic(err)
	}
	return env, func() { _ = os.RemoveAll(root) }
}

// A runtime's unit test sets a pod up on a fake network, without root or
// plugin binaries, and reads the pod's IP as the runtime would.
func Example() {
	env, cleanup := newExampleEnv()
	defer cleanup()
	if _, err := ocicnitest.WriteConflist(env.ConfDir, "podnet", "1.0.0", "bridge", "portmap"); err != nil {
		panic(err)
	}
	m, err := ocicni.New(env.Options()...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()
	netns, err := ocicnitest.NewNetNS(env.NetNSDir, "pod1")
	if err != nil {
		panic(err)
	}

	results, err := m.SetUpPod(ocicni.PodNetwork{Name: "web", Namespace: "default", ID: "pod1", NetNS: netns})
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		iface, ips, err := ocicni.SandboxIPs(r)
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Name, iface.Name, ips[0].Address.String(), "gateway", ips[0].Gateway)
	}
	for _, c := range env.Exec.Calls() {
		fmt.Println(c, c.PluginType, "K8S_POD_NAME="+c.Args["K8S_POD_NAME"])
	}
	// Output:
	// podnet eth0 10.88.0.2/16 gateway 10.88.0.1
	// ADD podnet eth0 pod1 bridge K8S_POD_NAME=web
	// ADD podnet eth0 pod1 portmap K8S_POD_NAME=web
}

// A plugin that answers DEL with code 11 (try again later) makes the
// teardown fail with a TeardownError, whose outcomes say which attachment
// to retry; the others were deleted.
func ExampleFakeExec_Fail() {
	env, cleanup := newExampleEnv()
	defer cleanup()
	for _, name := range []string{"podnet", "storage"} {
		if _, err := ocicnitest.WriteConflist(env.ConfDir, name, "1.0.0", "bridge"); err != nil {
			panic(err)
		}
	}
	m, err := ocicni.New(env.Options()...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()
	netns, err := ocicnitest.NewNetNS(env.NetNSDir, "pod1")
	if err != nil {
		panic(err)
	}
	pod := ocicni.PodNetwork{
		Name: "web", Namespace: "default", ID: "pod1", NetNS: netns,
		Networks: []ocicni.NetAttachment{{Name: "podnet"}, {Name: "storage"}},
	}
	if _, err := m.SetUpPod(pod); err != nil {
		panic(err)
	}

	env.Exec.Fail("storage", "DEL", &types.Error{Code: types.ErrTryAgainLater, Msg: "busy"})
	pod.Networks = nil // tear down whatever the pod has, from the cache
	err = m.TearDownPodWithContext(context.Background(), pod)

	var terr *ocicni.TeardownError
	var perr *types.Error
	fmt.Println(errors.As(err, &terr), errors.As(err, &perr) && perr.Code == types.ErrTryAgainLater)
	for _, o := range terr.Outcomes {
		fmt.Println(o.Network, o.IfName, o.Class)
	}
	for _, c := range env.Exec.Calls("DEL") {
		fmt.Println(c)
	}
	// Output:
	// true true
	// storage eth1 retry-later
	// podnet eth0 deleted
	// DEL storage eth1 pod1
	// DEL podnet eth0 pod1
}

// GC with ocicni.WithGCAllNetworks deletes a cache entry that no valid
// pod owns, with the config cached at ADD, even though its network's
// config file is gone and no order record names it. By default GC leaves
// such an entry alone: it may be another runtime's.
func ExampleWriteCacheEntry() {
	env, cleanup := newExampleEnv()
	defer cleanup()
	if _, err := ocicnitest.WriteConflist(env.ConfDir, "podnet", "1.1.0", "bridge"); err != nil {
		panic(err)
	}
	stale, err := ocicnitest.WriteCacheEntry(env.CacheDir, ocicnitest.CacheEntry{
		Network: "oldnet", ContainerID: "gone", IfName: "eth0", CNIVersion: "1.0.0",
		PluginTypes: []string{"macvlan"}, Args: map[string]string{"K8S_POD_NAME": "old"},
	})
	if err != nil {
		panic(err)
	}
	m, err := ocicni.New(env.Options(ocicni.WithGCAllNetworks())...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()

	if err := m.GC(context.Background(), nil); err != nil {
		panic(err)
	}
	for _, c := range env.Exec.Calls() {
		fmt.Println(c, c.PluginType)
	}
	gc := env.Exec.Calls("GC")[0]
	fmt.Println("valid attachments:", len(gc.ValidAttachments()))
	_, err = os.Stat(stale)
	fmt.Println("entry removed:", errors.Is(err, os.ErrNotExist))
	// Output:
	// DEL oldnet eth0 gone macvlan
	// GC podnet bridge
	// valid attachments: 0
	// entry removed: true
}
