package ocicni

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzRuntimeConf feeds arbitrary pod fields through the request checks
// and the runtime-config builder. Invariant: a request that passes the
// checks yields CNI_ARGS that parse back into exactly the pairs that were
// set (no value can inject or override a key), and an environment that
// libcni can pass to a plugin (no NUL, no newline).
func FuzzRuntimeConf(f *testing.F) {
	f.Add("ctr1", "web", "default", "uid-1", "eth0", "net", "10.0.0.5", "")
	f.Add("ctr1", "x;IP=10.0.0.5", "default", "u", "eth0", "net", "", "")
	f.Add("ctr1", "web", "ns", "u=1", "eth0", "net", "", "0a:58:0a:00:00:02")
	f.Add("../x", "web", "ns", "u", "eth0/../..", "../net", "1.2.3", "nope")
	f.Add("a", "w\x00", "n\n", "u", "e", "n", "", "")
	f.Fuzz(func(t *testing.T, id, name, namespace, uid, ifname, network, ip, mac string) {
		pod := PodNetwork{
			ID: id, Name: name, Namespace: namespace, UID: uid, NetNS: "/run/netns/x",
			RuntimeConfig: map[string]RuntimeConfig{network: {IP: ip, MAC: mac}},
		}
		if checkPodArgs(&pod) != nil {
			return
		}
		atts, err := assignIfnames([]NetAttachment{{Name: network, Ifname: ifname}}, "")
		if err != nil {
			return
		}
		rt, err := buildRuntimeConf(&pod, atts[0], false)
		if err != nil {
			return
		}
		got := envArgs(t, rt)
		assert.Equal(t, name, got["K8S_POD_NAME"])
		assert.Equal(t, namespace, got["K8S_POD_NAMESPACE"])
		assert.Equal(t, uid, got["K8S_POD_UID"])
		assert.Equal(t, id, got["K8S_POD_INFRA_CONTAINER_ID"])
		assert.Equal(t, ip, got["IP"])
		assert.Equal(t, mac, got["MAC"])
	})
}

// FuzzRuntimeConfArgsAsGiven feeds arbitrary CNI_ARGS pairs through the
// builder as [WithArgsAsGiven] runs it. Invariant: when it accepts them,
// CNI_ARGS parses back into exactly the pairs given, the first of a
// repeated key winning, and holds nothing else.
func FuzzRuntimeConfArgsAsGiven(f *testing.F) {
	f.Add("IP", "10.0.0.5", "K8S_POD_NAME", "host")
	f.Add("A", "b;IP=10.0.0.5", "IP", "x")
	f.Add("A", "1", "A", "2")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		pod := PodNetwork{ID: "ctr1", NetNS: "/run/netns/x", RuntimeConfig: map[string]RuntimeConfig{
			"net": {ExtraArgs: [][2]string{{k1, v1}, {k2, v2}}},
		}}
		rt, err := buildRuntimeConf(&pod, NetAttachment{Name: "net", Ifname: "eth0"}, true)
		if err != nil {
			return
		}
		want := map[string]string{k1: v1}
		if _, dup := want[k2]; !dup {
			want[k2] = v2
		}
		got := envArgs(t, rt)
		assert.Equal(t, want, got)
	})
}

// envArgs returns the CNI_ARGS pairs of the environment libcni gives a
// plugin for rt, failing on a pair without "=", a key set twice, a NUL
// anywhere, or a CNI_ variable that spans lines.
func envArgs(t *testing.T, rt *libcni.RuntimeConf) map[string]string {
	t.Helper()
	args := &invoke.Args{
		Command: "ADD", ContainerID: rt.ContainerID, NetNS: rt.NetNS,
		PluginArgs: rt.Args, IfName: rt.IfName, Path: "/opt/cni/bin",
	}
	var cniArgs string
	for _, kv := range args.AsEnv() {
		require.NotContains(t, kv, "\x00")
		if v, ok := strings.CutPrefix(kv, "CNI_ARGS="); ok {
			cniArgs = v
		}
		if strings.HasPrefix(kv, "CNI_") {
			assert.NotContains(t, kv, "\n", "a CNI_ variable spans lines")
		}
	}
	got := map[string]string{}
	for _, pair := range strings.Split(cniArgs, ";") {
		k, v, ok := strings.Cut(pair, "=")
		require.True(t, ok, "pair %q of %q", pair, cniArgs)
		_, dup := got[k]
		require.False(t, dup, "key %s set twice in %q", k, cniArgs)
		got[k] = v
	}
	return got
}
