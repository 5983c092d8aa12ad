package ocicni

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

func TestSetUpTearDownBridge(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	n := e.bridgeNet("bridgenet", "1.0.0")
	m := e.start()
	pod := e.pod("web")
	before := hostLinks(t)

	results, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, results, 1)
	assert.Equal(t, NetAttachment{Name: "bridgenet", Ifname: "eth0"}, results[0].NetAttachment)
	ips := resultIPs(t, results[0])
	require.Len(t, ips, 1)
	ip, ipnet, err := net.ParseCIDR(ips[0])
	require.NoError(t, err)
	_, subnet, _ := net.ParseCIDR(n.Subnet)
	assert.True(t, subnet.Contains(ip), "%s in %s", ip, n.Subnet)
	assert.Equal(t, subnet.Mask, ipnet.Mask)

	assert.Equal(t, []string{ips[0]}, testenv.AddrsIn(t, pod.NetNS, "eth0"), "the reported IP is on eth0 in the netns")
	assert.Contains(t, testenv.AddrsIn(t, pod.NetNS, "lo"), "127.0.0.1/8", "lo is up")
	assert.Equal(t, []string{ip.String()}, testenv.Reservations(t, e.dataDir, "bridgenet"))
	assert.Len(t, e.cacheFiles(), 1)
	// Host-side veths are the new links enslaved to this test's bridge
	// (other test packages may be creating links at the same time).
	var newLinks []string
	for l := range hostLinks(t) {
		master, _ := os.Readlink("/sys/class/net/" + l + "/master")
		if !before[l] && filepath.Base(master) == n.Bridge {
			newLinks = append(newLinks, l)
		}
	}
	require.Len(t, newLinks, 1, "one host-side veth on the bridge")

	status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, status, 1)
	assert.Equal(t, ips, resultIPs(t, status[0]))

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "bridgenet")
	after := hostLinks(t)
	for _, l := range newLinks {
		assert.False(t, after[l], "host veth %s removed", l)
	}
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod), "teardown is idempotent")
}

func TestSetUpMultipleNetworks(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	// macvlan below uses neta's bridge as its master, which makes the bridge
	// promiscuous; bridge's CHECK must expect that.
	a := testenv.Alloc(t)
	e.addConf("neta", testenv.Conflist("neta", "1.0.0", `{"type":"bridge","bridge":"`+a.Bridge+
		`","isGateway":true,"promiscMode":true,"ipam":{"type":"host-local","dataDir":"`+e.dataDir+
		`","ranges":[[{"subnet":"`+a.Subnet+`"}]]}}`))
	nb := testenv.Alloc(t)
	e.addConf("netb", testenv.Conflist("netb", "1.0.0", `{"type":"ptp","ipMasq":false,"ipam":{"type":"host-local","dataDir":"`+
		e.dataDir+`","ranges":[[{"subnet":"`+nb.Subnet+`"}]]}}`))
	nc := testenv.Alloc(t)
	e.addConf("netc", testenv.Conflist("netc", "1.0.0", `{"type":"macvlan","master":"`+a.Bridge+`","mode":"bridge","ipam":{"type":"host-local","dataDir":"`+
		e.dataDir+`","ranges":[[{"subnet":"`+nc.Subnet+`"}]]}}`,
		`{"type":"tuning","mtu":1400}`))
	m := e.start()
	pod := e.pod("multi")
	pod.Networks = []NetAttachment{{Name: "neta"}, {Name: "netb"}, {Name: "netc", Ifname: "net2"}}

	results, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, results, 3)
	want := []NetAttachment{{Name: "neta", Ifname: "eth0"}, {Name: "netb", Ifname: "eth1"}, {Name: "netc", Ifname: "net2"}}
	for i, r := range results {
		assert.Equal(t, want[i], r.NetAttachment, "results come in request order")
		ips := resultIPs(t, r)
		require.Len(t, ips, 1)
		assert.Equal(t, ips, testenv.AddrsIn(t, pod.NetNS, r.Ifname), "IP of %s is on %s", r.Name, r.Ifname)
	}
	assert.Len(t, e.cacheFiles(), 3)
	var mtu int
	require.NoError(t, netns.Do(pod.NetNS, func() error {
		iface, err := netns.LinkByName("net2")
		if err == nil {
			mtu = iface.MTU
		}
		return err
	}))
	assert.Equal(t, 1400, mtu, "tuning ran on net2")

	// Status without Networks reports every attachment in ADD order.
	status, err := m.GetPodNetworkStatusWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS, Name: pod.Name, Namespace: pod.Namespace})
	require.NoError(t, err)
	require.Len(t, status, 3)
	for i := range status {
		assert.Equal(t, want[i], status[i].NetAttachment)
	}

	teardown := pod
	teardown.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), teardown))
	e.assertClean(pod, "neta", "netb", "netc")
}

func TestRuntimeConfigReachesPlugins(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	caps := `"capabilities":{"portMappings":true,"bandwidth":true,"ipRanges":true,"aliases":true,"cgroupPath":true,"io.kubernetes.cri.pod-annotations":true}`
	rec := strings.Replace(e.recorder("capnet", "1.0.0", nil), `"type"`, caps+`,"type"`, 1)
	e.bridgeNet("capnet", "1.0.0", rec)
	m := e.start()
	pod := e.pod("caps")
	annotations := map[string]string{"k": "v"}
	pod.Aliases = map[string][]string{"capnet": {"svc"}}
	pod.RuntimeConfig = map[string]RuntimeConfig{"capnet": {
		PortMappings: []PortMapping{{HostPort: 18080, ContainerPort: 80, Protocol: "tcp"}},
		Bandwidth:    &BandwidthConfig{IngressRate: 1000, IngressBurst: 2000, EgressRate: 3000, EgressBurst: 4000},
		IpRanges:     [][]IpRange{{{Subnet: "10.9.0.0/24"}}},
		CgroupPath:   "/kubepods/podx", PodAnnotations: &annotations,
		MAC: "02:42:ac:11:00:99",
	}}
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	adds := e.calls("ADD")
	require.Len(t, adds, 1)
	rc, err := json.Marshal(adds[0].RuntimeConfig())
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"portMappings":[{"hostPort":18080,"containerPort":80,"protocol":"tcp","hostIP":""}],
		"bandwidth":{"ingressRate":1000,"ingressBurst":2000,"egressRate":3000,"egressBurst":4000},
		"ipRanges":[[{"subnet":"10.9.0.0/24"}]],
		"aliases":{"capnet":["svc"]},
		"cgroupPath":"/kubepods/podx",
		"io.kubernetes.cri.pod-annotations":{"k":"v"}}`, string(rc))
	args := adds[0].Args
	for _, kv := range []string{
		"IgnoreUnknown=1", "K8S_POD_NAMESPACE=test", "K8S_POD_NAME=caps",
		"K8S_POD_INFRA_CONTAINER_ID=" + pod.ID, "K8S_POD_UID=uid-caps", "MAC=02:42:ac:11:00:99",
	} {
		assert.Contains(t, strings.Split(args, ";"), kv)
	}
	// The bridge honoured the static MAC.
	require.NoError(t, netns.Do(pod.NetNS, func() error {
		iface, err := netns.LinkByName("eth0")
		if err == nil {
			assert.Equal(t, "02:42:ac:11:00:99", iface.HardwareAddr.String())
		}
		return err
	}))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "capnet")
}

func TestStaticIPReachesHostLocal(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	n := e.bridgeNet("staticnet", "1.0.0")
	m := e.start()
	pod := e.pod("static")
	want := strings.TrimSuffix(n.Gateway, ".1") + ".77"
	pod.RuntimeConfig = map[string]RuntimeConfig{"staticnet": {IP: want}}
	res, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	assert.Equal(t, []string{want + "/24"}, resultIPs(t, res[0]))
	assert.Equal(t, []string{want}, testenv.Reservations(t, e.dataDir, "staticnet"))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "staticnet")
}
