package cni_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

func TestGetConfigShape(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a", "b")
	f := newFace(t, env, cni.WithPluginMaxConfNum(1), cni.WithLoNetwork, cni.WithDefaultConf)
	cfg := f.GetConfig()
	assert.Equal(t, []string{env.BinDir}, cfg.PluginDirs)
	assert.Equal(t, env.ConfDir, cfg.PluginConfDir)
	assert.Equal(t, 1, cfg.PluginMaxConfNum)
	assert.Equal(t, "eth", cfg.Prefix)
	require.Len(t, cfg.Networks, 2)
	assert.Equal(t, "lo", cfg.Networks[0].IFName)
	assert.Equal(t, "cni-loopback", cfg.Networks[0].Config.Name)
	assert.Equal(t, "eth0", cfg.Networks[1].IFName)
	assert.Equal(t, "a", cfg.Networks[1].Config.Name)
	assert.Equal(t, "1.0.0", cfg.Networks[1].Config.CNIVersion)
	require.Len(t, cfg.Networks[1].Config.Plugins, 1)
	assert.Equal(t, "bridge", cfg.Networks[1].Config.Plugins[0].Network.Type)
	assert.Contains(t, cfg.Networks[1].Config.Source, `"name":"a"`)
}

func TestNamespaceOptionsReachThePlugin(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "a", "1.0.0", `{"type":"bridge","capabilities":{"portMappings":true,"bandwidth":true,"dns":true,`+
		`"cgroupPath":true,"ipRanges":true,"io.kubernetes.cri.pod-annotations":true,"custom":true}}`)
	f := newFace(t, env, cni.WithDefaultConf)
	_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"),
		cni.WithLabels(map[string]string{
			"K8S_POD_NAME": "web", "K8S_POD_NAMESPACE": "default", "K8S_POD_UID": "u1",
			"K8S_POD_INFRA_CONTAINER_ID": "pod1", "IgnoreUnknown": "1",
		}),
		cni.WithArgs("EXTRA", "x"),
		cni.WithCapabilityPortMap([]cni.PortMapping{{HostPort: 80, ContainerPort: 8080, Protocol: "tcp"}}),
		cni.WithCapabilityBandWidth(cni.BandWidth{IngressRate: 1000, EgressBurst: 5}),
		cni.WithCapabilityDNS(cni.DNS{Servers: []string{"10.0.0.10"}, Searches: []string{"svc"}}),
		cni.WithCapabilityCgroupPath("/kubepods/pod1"),
		cni.WithCapabilityIPRanges([]cni.IPRanges{{Subnet: "10.1.0.0/16"}}),
		cni.WithCapability("io.kubernetes.cri.pod-annotations", map[string]string{"k": "v"}),
		cni.WithCapability("custom", 7),
	)
	require.NoError(t, err)
	adds := env.Exec.Calls("ADD")
	require.Len(t, adds, 1)
	c := adds[0]
	assert.Equal(t, map[string]string{
		"IgnoreUnknown": "1", "K8S_POD_NAME": "web", "K8S_POD_NAMESPACE": "default",
		"K8S_POD_UID": "u1", "K8S_POD_INFRA_CONTAINER_ID": "pod1", "EXTRA": "x",
	}, c.Args)
	rc, ok := c.Config["runtimeConfig"].(map[string]any)
	require.True(t, ok, "runtimeConfig in %s", c.Stdin)
	assert.Equal(t, []any{map[string]any{"hostPort": float64(80), "containerPort": float64(8080), "protocol": "tcp", "hostIP": ""}}, rc["portMappings"])
	assert.Equal(t, map[string]any{"ingressRate": float64(1000), "ingressBurst": float64(0), "egressRate": float64(0), "egressBurst": float64(5)}, rc["bandwidth"])
	assert.Equal(t, map[string]any{"servers": []any{"10.0.0.10"}, "searches": []any{"svc"}, "options": nil}, rc["dns"])
	assert.Equal(t, "/kubepods/pod1", rc["cgroupPath"])
	assert.Equal(t, []any{[]any{map[string]any{"subnet": "10.1.0.0/16"}}}, rc["ipRanges"])
	assert.Equal(t, map[string]any{"k": "v"}, rc["io.kubernetes.cri.pod-annotations"])
	assert.InDelta(t, 7, rc["custom"], 0)
}

// Plugins receive the caller's CNI_ARGS pairs and nothing else, as with
// go-cni: no pair of the engine's, none of the process's CNI_ARGS
// variable, and IP and MAC given with WithArgs (see bench/gocni's
// TestArgsMatchGoCNI for both libraries side by side, and
// TestRealStaticIPThroughArgs for host-local honouring IP).
func TestPluginsGetTheCallersArgsOnly(t *testing.T) {
	t.Setenv("CNI_ARGS", "LEAKED=1;K8S_POD_NAME=leaked")
	tests := []struct {
		name string
		opts []cni.NamespaceOpts
		want map[string]string
	}{
		{name: "none", want: map[string]string{}},
		{
			name: "hostname as BuildKit passes it",
			opts: []cni.NamespaceOpts{cni.WithArgs("K8S_POD_NAME", "host"), cni.WithArgs("IgnoreUnknown", "1")},
			want: map[string]string{"K8S_POD_NAME": "host", "IgnoreUnknown": "1"},
		},
		{
			name: "static IP and MAC",
			opts: []cni.NamespaceOpts{cni.WithArgs("IP", "10.4.0.9"), cni.WithArgs("MAC", "02:00:00:00:00:09")},
			want: map[string]string{"IP": "10.4.0.9", "MAC": "02:00:00:00:00:09"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ocicnitest.NewEnv(t)
			env.WriteConflist(t, "a", "1.0.0", "bridge")
			f := newFace(t, env, cni.WithDefaultConf)
			ns := env.NetNS(t, "pod1")
			_, err := f.Setup(context.Background(), "pod1", ns, tt.opts...)
			require.NoError(t, err)
			require.NoError(t, f.Remove(context.Background(), "pod1", ns, tt.opts...))
			for _, verb := range []string{"ADD", "DEL"} {
				got := env.Exec.Calls(verb)
				require.Len(t, got, 1, verb)
				args := got[0].Args
				if args == nil {
					args = map[string]string{}
				}
				assert.Equal(t, tt.want, args, verb)
			}
		})
	}
}

// A pair that would make the plugin read other pairs than given is
// refused before any plugin runs.
func TestInjectingArgsRunNoPlugin(t *testing.T) {
	for _, kv := range [][2]string{{"A", "b;IP=10.0.0.1"}, {"A=B", "c"}, {"", "x"}, {"A", "b\x00"}, {"\nA", "b"}, {"A", "b\nc"}} {
		env := ocicnitest.NewEnv(t)
		env.WriteConflist(t, "a", "1.0.0", "bridge")
		f := newFace(t, env, cni.WithDefaultConf)
		_, err := f.Setup(context.Background(), "pod1", env.NetNS(t, "pod1"), cni.WithArgs(kv[0], kv[1]))
		require.ErrorIs(t, err, ocicni.ErrInvalidArgument, "%q", kv)
		assert.Empty(t, env.Exec.Calls(), "%q", kv)
	}
}

func TestHostileInputRunsNoPlugin(t *testing.T) {
	tests := []struct {
		name, id, prefix string
	}{
		{name: "container ID with a slash", id: "../../etc", prefix: "eth"},
		{name: "interface prefix with a slash", id: "pod1", prefix: "e/th"},
		{name: "interface name too long", id: "pod1", prefix: "averyveryverylongprefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ocicnitest.NewEnv(t)
			writeNets(t, env, "a")
			f := newFace(t, env, cni.WithInterfacePrefix(tt.prefix), cni.WithDefaultConf)
			_, err := f.Setup(context.Background(), tt.id, env.NetNS(t, "pod1"))
			require.Error(t, err)
			assert.Empty(t, env.Exec.Calls("ADD", "DEL"))
		})
	}
}

func TestGCDeletesStaleSandboxes(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	writeNets(t, env, "a")
	f := newFace(t, env, cni.WithDefaultConf)
	for _, id := range []string{"keep", "stale"} {
		_, err := f.Setup(context.Background(), id, env.NetNS(t, id))
		require.NoError(t, err)
	}
	env.Exec.ResetCalls()
	require.NoError(t, f.GC(context.Background(), []string{"keep"}))
	var dels []string
	for _, c := range env.Exec.Calls("DEL") {
		dels = append(dels, c.ContainerID)
	}
	assert.Equal(t, []string{"stale"}, dels)
}
