package ocicni

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

func rawResult(t *testing.T, s string) json.RawMessage {
	t.Helper()
	require.True(t, json.Valid([]byte(s)), s)
	return json.RawMessage(s)
}

func TestEmptyResultAsOnlyPlugin(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("cfg", e.recorder("cfg", "1.0.0", map[string]any{"add": map[string]any{"emptyResult": true}}))
	m := e.start()
	pod := e.pod("p")
	res, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NotNil(t, res[0].Result, "the result is present")
	cur := mustCurrent(t, res[0].Result)
	assert.Empty(t, cur.Interfaces)
	assert.Empty(t, cur.IPs)
	_, _, err = SandboxIPs(res[0])
	require.ErrorIs(t, err, ErrNoSandboxInterface)

	status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, status, 1)
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod)
}

func TestEmptyResultAtEndOfRealChain(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.bridgeNet("chain", "1.0.0", e.recorder("chain", "1.0.0", map[string]any{"add": map[string]any{"emptyResult": true}}))
	m := e.start()
	pod := e.pod("p")
	res, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Empty(t, mustCurrent(t, res[0].Result).IPs, "the chain's result is the last plugin's")
	assert.Len(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), 1, "bridge still configured eth0")
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "chain")
}

func TestResultShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		version   string
		result    string
		wantVer   string
		wantIface string
		wantIPs   []string
		convWarn  bool // status must log that the cached result was returned as stored
	}{
		{
			name: "0.2.0 result without interfaces", version: "0.2.0",
			result:  `{"cniVersion":"0.2.0","ip4":{"ip":"10.99.0.5/24","gateway":"10.99.0.1"}}`,
			wantVer: "0.2.0", wantIPs: []string{"10.99.0.5/24"},
		},
		{
			name: "0.1.0 result", version: "0.1.0",
			result:  `{"cniVersion":"0.1.0","ip4":{"ip":"10.99.1.5/24"}}`,
			wantVer: "0.1.0", wantIPs: []string{"10.99.1.5/24"},
		},
		{
			name: "host and sandbox interfaces, IP without index", version: "1.0.0",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"veth1","mac":"02:00:00:00:00:01"},{"name":"eth0","sandbox":"/x"}],
				"ips":[{"address":"10.99.2.1/24","interface":0},{"address":"10.99.2.5/24","interface":1},{"address":"fd00::5/64"}]}`,
			wantVer: "1.0.0", wantIface: "eth0", wantIPs: []string{"10.99.2.5/24", "fd00::5/64"},
		},
		{
			name: "1.1.0 delegated IPAM result", version: "1.1.0",
			result:  `{"cniVersion":"1.1.0","ips":[{"address":"10.99.3.5/24"}]}`,
			wantVer: "1.1.0", wantIPs: []string{"10.99.3.5/24"},
		},
		{
			name: "0.3.1 result", version: "0.3.1",
			result:  `{"cniVersion":"0.3.1","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"version":"4","address":"10.99.4.5/24","interface":0}]}`,
			wantVer: "0.3.1", wantIface: "eth0", wantIPs: []string{"10.99.4.5/24"},
		},
		{
			name: "0.3.0 result", version: "0.3.0",
			result:  `{"cniVersion":"0.3.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"version":"4","address":"10.99.6.5/24","interface":0}]}`,
			wantVer: "0.3.0", wantIface: "eth0", wantIPs: []string{"10.99.6.5/24"},
		},
		{
			name: "0.4.0 result", version: "0.4.0",
			result:  `{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"version":"4","address":"10.99.5.5/24","interface":0}]}`,
			wantVer: "0.4.0", wantIface: "eth0", wantIPs: []string{"10.99.5.5/24"},
		},
		{
			// A 1.0.0 result without IPs cannot be converted down to the
			// config's 0.2.0: the raw result is kept and returned.
			name: "result that cannot be converted to the config version", version: "0.2.0",
			result:  `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}]}`,
			wantVer: "1.0.0", wantIface: "eth0", convWarn: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.addConf("shape", e.recorder("shape", tt.version, map[string]any{"add": map[string]any{"result": rawResult(t, tt.result)}}))
			m := e.start()
			pod := e.pod("p")
			pod.Networks = []NetAttachment{{Name: "shape"}}
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			require.Len(t, res, 1)
			assert.Equal(t, tt.wantVer, res[0].Result.Version())
			checkShape(t, res[0], tt.wantIface, tt.wantIPs)

			status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err, "status never fails on a result shape")
			require.Len(t, status, 1)
			checkShape(t, status[0], tt.wantIface, tt.wantIPs)
			warned := false
			for _, entry := range e.log.AllEntries() {
				warned = warned || strings.Contains(entry.Message, "cannot be converted")
			}
			assert.Equal(t, tt.convWarn, warned, "conversion error logged")

			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod)
		})
	}
}

func checkShape(t *testing.T, r NetResult, wantIface string, wantIPs []string) {
	t.Helper()
	iface, ips, err := SandboxIPs(r)
	if wantIface == "" && wantIPs == nil {
		require.ErrorIs(t, err, ErrNoSandboxInterface)
		return
	}
	require.NoError(t, err)
	if wantIface == "" {
		assert.Nil(t, iface)
	} else {
		require.NotNil(t, iface)
		assert.Equal(t, wantIface, iface.Name)
	}
	var got []string
	for _, ip := range ips {
		got = append(got, ip.Address.String())
	}
	assert.Equal(t, wantIPs, got)
}

func TestSandboxIPsNeverPanics(t *testing.T) {
	for _, r := range []types.Result{
		nil,
		&types100.Result{CNIVersion: "1.0.0"},
		&types100.Result{CNIVersion: "1.0.0", IPs: []*types100.IPConfig{nil, {Interface: types100.Int(7)}}},
		&types100.Result{CNIVersion: "1.0.0", Interfaces: []*types100.Interface{nil}},
	} {
		assert.NotPanics(t, func() { _, _, _ = SandboxIPs(NetResult{Result: r}) })
	}
}

func TestRealPluginsAtEveryVersion(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.bridgeNet("net", version, `{"type":"tuning","mtu":1400}`)
			m := e.start()
			pod := e.pod("p")
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			assert.Equal(t, version, res[0].Result.Version())
			_, ips, err := SandboxIPs(res[0])
			require.NoError(t, err)
			require.Len(t, ips, 1)
			assert.Equal(t, []string{ips[0].Address.String()}, testenv.AddrsIn(t, pod.NetNS, "eth0"))

			status, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err, "CHECK passes")
			assert.Equal(t, resultIPs(t, res[0]), resultIPs(t, status[0]))
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "net")
		})
	}
}

func TestStatusVerb(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	flag := faultFlag(t)
	e.addConf("sick", e.recorder("sick", "1.1.0", map[string]any{
		"status": map[string]any{"errorCode": 50, "errorMsg": "not ready", "onlyIfExists": flag},
	}))
	e.addConf("old", e.recorder("old", "1.0.0", nil))
	e.addConf("sicker", e.recorder("sicker", "1.1.0", map[string]any{"status": map[string]any{"errorCode": 51}}))
	m := e.start()

	err := m.Status()
	var ce *types.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ErrCodePluginNotAvailable, ce.Code)
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, "sick", ne.Network)

	statuses := m.NetworkStatuses(e.ctx())
	require.Len(t, statuses, 3)
	assert.Equal(t, "old", statuses[0].Network)
	require.NoError(t, statuses[0].Err)
	assert.Equal(t, "sick", statuses[1].Network)
	assert.True(t, statuses[1].Default)
	require.ErrorAs(t, statuses[2].Err, &ce)
	assert.Equal(t, ErrCodeLimitedConnectivity, ce.Code)
	assert.NotContains(t, e.callNetworks("STATUS"), "old", "a 1.0.0 network skips STATUS")

	require.NoError(t, os.Remove(flag))
	require.NoError(t, m.Status(), "healthy once the plugin recovers")
}
