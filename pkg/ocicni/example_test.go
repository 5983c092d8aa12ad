package ocicni_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// exampleEnv gives an example a conf dir with one fake network, and the
// options that fake plugins and namespaces (see package ocicnitest).
func exampleEnv() (env *ocicnitest.Env, cleanup func()) {
	root, err := os.MkdirTemp("", "ocicni-example-")
	if err != nil {
		panic(err)
	}
	if env, err = ocicnitest.NewEnvAt(root); err != nil {
		panic(err)
	}
	if _, err := ocicnitest.WriteConflist(env.ConfDir, "podnet", "1.0.0", "bridge"); err != nil {
		panic(err)
	}
	return env, func() { _ = os.RemoveAll(root) }
}

// New takes options; WithExec replaces the plugin executor, here with a
// fake from package ocicnitest, so that the example needs no root and no
// plugin binaries.
func ExampleNew() {
	env, cleanup := exampleEnv()
	defer cleanup()

	m, err := ocicni.New(
		ocicni.WithConfDir(env.ConfDir),
		ocicni.WithBinDirs(env.BinDir),
		ocicni.WithCacheDir(env.CacheDir),
		ocicni.WithExec(env.Exec),
		ocicni.WithNetNSOps(env.Exec),
		ocicni.WithoutWatcher(),
	)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()
	fmt.Println(m.GetDefaultNetworkName(), m.Status())
	// Output: podnet <nil>
}

// SandboxIPs picks the sandbox interface and its IPs out of a result of
// any CNI version, here one that also lists the host-side veth.
func ExampleSandboxIPs() {
	_, addr, _ := net.ParseCIDR("10.88.0.5/16")
	addr.IP = net.ParseIP("10.88.0.5")
	res := &types100.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{
			{Name: "veth1234"},                         // on the host
			{Name: "eth0", Sandbox: "/run/netns/pod1"}, // in the pod
		},
		IPs: []*types100.IPConfig{{Interface: types100.Int(1), Address: *addr}},
	}
	iface, ips, err := ocicni.SandboxIPs(ocicni.NetResult{
		Result:        res,
		NetAttachment: ocicni.NetAttachment{Name: "podnet", Ifname: "eth0"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(iface.Name, ips[0].Address.String())
	// Output: eth0 10.88.0.5/16
}

// TearDownPodOutcomes reports every attachment's outcome; a DEL that
// fails with code 11 (try again later) is a RetryLater failure, returned
// in a TeardownError under the strict policy, and its plugin error stays
// reachable.
func ExampleManager_TearDownPodOutcomes() {
	env, cleanup := exampleEnv()
	defer cleanup()
	m, err := ocicni.New(env.Options()...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = m.Shutdown() }()
	netns, err := ocicnitest.NewNetNS(env.NetNSDir, "pod1")
	if err != nil {
		panic(err)
	}
	pod := ocicni.PodNetwork{Name: "web", Namespace: "default", ID: "pod1", NetNS: netns}
	if _, err := m.SetUpPodWithContext(context.Background(), pod); err != nil {
		panic(err)
	}

	env.Exec.Fail("podnet", "DEL", types.NewError(types.ErrTryAgainLater, "busy", ""))
	outcomes, err := m.TearDownPodOutcomes(context.Background(), pod)
	for _, o := range outcomes {
		fmt.Println(o.Network, o.IfName, o.Class)
	}
	var te *ocicni.TeardownError
	var ce *types.Error
	fmt.Println(errors.As(err, &te), errors.As(err, &ce) && ce.Code == types.ErrTryAgainLater)

	env.Exec.Clear("podnet", "DEL") // the plugin recovers; DEL is idempotent
	outcomes, err = m.TearDownPodOutcomes(context.Background(), pod)
	fmt.Println(outcomes[0].Class, err)
	// Output:
	// podnet eth0 retry-later
	// true true
	// deleted <nil>
}
