package cni_test

import (
	"context"
	"net"
	"os"
	"reflect"
	"sort"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// fakeCNI mirrors containerd's own fake: exactly go-cni's seven methods.
// If CNI grew a method, this file would not compile.
type fakeCNI struct{}

func (fakeCNI) Setup(context.Context, string, string, ...cni.NamespaceOpts) (*cni.Result, error) {
	return &cni.Result{}, nil
}

func (fakeCNI) SetupSerially(context.Context, string, string, ...cni.NamespaceOpts) (*cni.Result, error) {
	return &cni.Result{}, nil
}
func (fakeCNI) Remove(context.Context, string, string, ...cni.NamespaceOpts) error { return nil }
func (fakeCNI) Check(context.Context, string, string, ...cni.NamespaceOpts) error  { return nil }
func (fakeCNI) Load(...cni.Opt) error                                              { return nil }
func (fakeCNI) Status() error                                                      { return nil }
func (fakeCNI) GetConfig() *cni.ConfigResult                                       { return &cni.ConfigResult{} }

var _ cni.CNI = fakeCNI{}

func TestCNIInterfaceIsGoCNIs(t *testing.T) {
	typ := reflect.TypeOf((*cni.CNI)(nil)).Elem()
	names := make([]string, 0, typ.NumMethod())
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	assert.Equal(t, []string{"Check", "GetConfig", "Load", "Remove", "Setup", "SetupSerially", "Status"}, names)

	// How containerd uses the surface, spelled out so that it compiles.
	var opts []cni.NamespaceOpts
	opts = append(opts,
		cni.WithLabels(map[string]string{"K8S_POD_NAME": "p"}),
		cni.WithCapability("io.kubernetes.cri.pod-annotations", map[string]string{}),
		cni.WithCapabilityPortMap([]cni.PortMapping{{HostPort: 80, ContainerPort: 8080, Protocol: "tcp"}}),
		cni.WithCapabilityBandWidth(cni.BandWidth{IngressRate: 1}),
		cni.WithCapabilityDNS(cni.DNS{Servers: []string{"10.0.0.10"}}),
		cni.WithCapabilityCgroupPath("/kubepods"),
		cni.WithCapabilityIPRanges([]cni.IPRanges{{Subnet: "10.1.0.0/16"}}),
		cni.WithArgs("K", "V"),
	)
	assert.Len(t, opts, 8)
	loadOpts := []cni.CNIOpt{cni.WithLoNetwork, cni.WithDefaultConf, cni.WithAllConf}
	assert.Len(t, loadOpts, 3)
	r := &cni.CNIResult{Interfaces: map[string]*cni.Config{"eth0": {IPConfigs: []*cni.IPConfig{{IP: net.IPv4(10, 0, 0, 2)}}}}}
	assert.Len(t, r.Interfaces["eth0"].IPConfigs, 1)
	assert.True(t, cni.IsCNINotInitialized(cni.ErrCNINotInitialized))
	assert.True(t, cni.IsInvalidConfig(cni.ErrInvalidConfig))
	assert.True(t, cni.IsNotFound(cni.ErrNotFound))
	assert.True(t, cni.IsReadFailure(cni.ErrRead))
	assert.True(t, cni.IsInvalidResult(cni.ErrInvalidResult))
	var mu cni.RWMutex
	mu.Lock()
	mu.Unlock() //nolint:staticcheck // only proves the alias
}

// newFace starts a face on env, as containerd does: New with the dirs and
// the minimum, then Load(WithLoNetwork, load).
func newFace(t *testing.T, env *ocicnitest.Env, opts ...cni.Opt) *cni.Face {
	t.Helper()
	all := append([]cni.Opt{
		cni.WithPluginDir([]string{env.BinDir}),
		cni.WithPluginConfDir(env.ConfDir),
		cni.WithEngineOptions(env.Options()...),
	}, opts...)
	c, err := cni.New(all...)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	return f
}

func writeNets(t *testing.T, env *ocicnitest.Env, names ...string) {
	t.Helper()
	for _, n := range names {
		env.WriteConflist(t, n, "1.0.0", "bridge")
	}
}

// calls returns "verb network ifname" of the first plugin of each call.
func calls(env *ocicnitest.Env, verbs ...string) []string {
	var out []string
	for _, c := range env.Exec.Calls(verbs...) {
		out = append(out, c.Verb+" "+c.Network+" "+c.IfName)
	}
	return out
}

func TestSetupNamesInterfacesAndReturnsGoCNIResult(t *testing.T) {
	tests := []struct {
		name    string
		load    []cni.Opt
		opts    []cni.Opt
		wantADD []string
		ifaces  []string
		ipOn    string // an interface that got an IP; the first non-lo one if empty
	}{
		{
			name: "containerd: lo and the first file", opts: []cni.Opt{cni.WithMinNetworkCount(2)},
			load:    []cni.Opt{cni.WithLoNetwork, cni.WithDefaultConf},
			wantADD: []string{"ADD a eth0"}, ifaces: []string{"eth0", "lo"},
		},
		{
			name: "max conf num 2", opts: []cni.Opt{cni.WithPluginMaxConfNum(2)},
			load:    []cni.Opt{cni.WithLoNetwork, cni.WithDefaultConf},
			wantADD: []string{"ADD a eth0", "ADD b eth1"}, ifaces: []string{"eth0", "eth1", "lo"},
		},
		{
			name:    "all conf, no lo",
			load:    []cni.Opt{cni.WithAllConf},
			wantADD: []string{"ADD a eth0", "ADD b eth1", "ADD c eth2"}, ifaces: []string{"eth0", "eth1", "eth2"},
		},
		{
			name: "prefix and conflist bytes count lo, as go-cni does", opts: []cni.Opt{cni.WithInterfacePrefix("net")},
			load: []cni.Opt{
				cni.WithLoNetwork,
				cni.WithConfListBytes(ocicnitest.Conflist("x", "1.0.0", "bridge")),
				cni.WithConfListBytes(ocicnitest.Conflist("y", "1.0.0", "bridge")),
			},
			wantADD: []string{"ADD x net1", "ADD y net2"}, ifaces: []string{"lo", "net0", "net1", "net2"},
			ipOn: "net1", // net0, the default interface, is always listed, empty here
		},
		{
			name: "single-plugin conf at an index",
			load: []cni.Opt{
				cni.WithConf([]byte(`{"cniVersion":"1.0.0","name":"s","type":"bridge"}`)),
				cni.WithConfIndex([]byte(`{"cniVersion":"1.0.0","name":"t","type":"bridge"}`), 3),
			},
			wantADD: []string{"ADD s eth0", "ADD t eth3"}, ifaces: []string{"eth0", "eth3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ocicnitest.NewEnv(t)
			writeNets(t, env, "a", "b", "c")
			f := newFace(t, env, tt.opts...)
			require.NoError(t, f.Load(tt.load...))
			ns := env.NetNS(t, "pod1")

			res, err := f.Setup(context.Background(), "pod1", ns, cni.WithLabels(map[string]string{"K8S_POD_NAME": "web"}))
			require.NoError(t, err)
			assert.Equal(t, tt.wantADD, calls(env, "ADD"))
			got := make([]string, 0, len(res.Interfaces))
			for k := range res.Interfaces {
				got = append(got, k)
			}
			sort.Strings(got)
			assert.Equal(t, tt.ifaces, got)
			first := tt.ifaces[0]
			if first == "lo" {
				first = tt.ifaces[1]
			}
			if tt.ipOn != "" {
				first = tt.ipOn
			}
			require.NotEmpty(t, res.Interfaces[first].IPConfigs)
			_, subnet, _ := net.ParseCIDR("10.88.0.0/16")
			assert.True(t, subnet.Contains(res.Interfaces[first].IPConfigs[0].IP))
			assert.Len(t, res.Raw(), len(f.GetConfig().Networks))
			assert.Equal(t, []string{ns}, env.Exec.LoopbackUps(), "lo set up in-process")
			for _, c := range env.Exec.Calls() {
				assert.NotEqual(t, "loopback", c.PluginType, "no loopback plugin runs")
			}
		})
	}
}

func TestLoopbackListedInResult(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a")
	f := newFace(t, env, cni.WithMinNetworkCount(2), cni.WithLoNetwork, cni.WithDefaultConf)
	ns := env.NetNS(t, "pod1")
	res, err := f.Setup(context.Background(), "pod1", ns)
	require.NoError(t, err)
	require.Contains(t, res.Interfaces, "lo")
	assert.Equal(t, ns, res.Interfaces["lo"].Sandbox)
	require.Len(t, res.Interfaces["lo"].IPConfigs, 2)
	assert.Equal(t, "127.0.0.1", res.Interfaces["lo"].IPConfigs[0].IP.String())
	assert.Len(t, res.DNS, 2, "one entry per network, lo included")
}

func TestRemoveRunsEveryDELInReversePastFailures(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a", "b", "c")
	f := newFace(t, env, cni.WithAllConf)
	ns := env.NetNS(t, "pod1")
	_, err := f.Setup(context.Background(), "pod1", ns)
	require.NoError(t, err)

	env.Exec.Fail("b", "DEL", &types.Error{Code: 100, Msg: "boom"})
	env.Exec.ResetCalls()
	err = f.Remove(context.Background(), "pod1", ns)
	require.Error(t, err)
	assert.Equal(t, []string{"DEL c eth2", "DEL b eth1", "DEL a eth0"}, calls(env, "DEL"))
	var td *ocicni.TeardownError
	require.ErrorAs(t, err, &td)
	require.Len(t, td.Failures(), 1)
	assert.Equal(t, "b", td.Failures()[0].Network)
	var cniErr *types.Error
	require.ErrorAs(t, err, &cniErr)
	assert.Equal(t, uint(100), cniErr.Code)

	env.Exec.Fail("b", "DEL", nil)
	require.NoError(t, f.Remove(context.Background(), "pod1", ns), "a retry finishes the teardown")
}

func TestSetupFailureRollsBack(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a", "b", "c")
	f := newFace(t, env, cni.WithAllConf)
	env.Exec.Fail("b", "ADD", &types.Error{Code: 100, Msg: "no"})
	_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	var se *ocicni.SetupError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{"ADD a eth0", "ADD b eth1", "DEL b eth1", "DEL a eth0"}, calls(env, "ADD", "DEL"))
}

func TestStatusMinNetworkCountAndRecovery(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	f := newFace(t, env, cni.WithMinNetworkCount(2))
	require.ErrorIs(t, f.Status(), cni.ErrCNINotInitialized, "nothing loaded yet")

	err := f.Load(cni.WithLoNetwork, cni.WithDefaultConf)
	require.ErrorIs(t, err, cni.ErrLoad)
	assert.True(t, cni.IsCNINotInitialized(err), "an empty conf dir")
	require.ErrorIs(t, f.Status(), cni.ErrCNINotInitialized)
	_, err = f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	require.ErrorIs(t, err, cni.ErrCNINotInitialized)
	assert.Empty(t, env.Exec.Calls("ADD"))

	// The file appears and nobody calls Load: Status and Setup pick it up.
	writeNets(t, env, "a")
	require.NoError(t, f.Status())
	assert.Len(t, f.GetConfig().Networks, 2)
	_, err = f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"))
	require.NoError(t, err)
}

func TestRemoveWorksFromCacheAfterFailedLoad(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	path := env.WriteConflist(t, "a", "1.0.0", "bridge", "portmap")
	f := newFace(t, env, cni.WithMinNetworkCount(2), cni.WithLoNetwork, cni.WithDefaultConf)
	ns := env.NetNS(t, "pod1")
	_, err := f.Setup(context.Background(), "pod1", ns)
	require.NoError(t, err)

	require.NoError(t, os.Remove(path))
	require.Error(t, f.Load(cni.WithLoNetwork, cni.WithDefaultConf))
	require.ErrorIs(t, f.Status(), cni.ErrCNINotInitialized)
	env.Exec.ResetCalls()
	require.NoError(t, f.Remove(context.Background(), "pod1", ns))
	var types []string
	for _, c := range env.Exec.Calls("DEL") {
		types = append(types, c.Network+"/"+c.PluginType)
	}
	assert.Equal(t, []string{"a/portmap", "a/bridge"}, types, "the cached config's plugins, in reverse")
}
