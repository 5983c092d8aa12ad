package testenv

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// TestBridgeEndToEnd runs the real bridge and host-local plugins, chained
// with the recorder, through libcni, and checks the helpers that inspect
// their effects.
func TestBridgeEndToEnd(t *testing.T) {
	RequireRoot(t)
	ctx := context.Background()
	n := Alloc(t)
	ns := NewNS(t)
	dataDir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")

	list, err := libcni.ConfListFromBytes([]byte(BridgeConflist("e2e", "1.0.0", n, dataDir,
		RecorderConf("e2e", "1.0.0", logFile, nil))))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "e2e-ctr", NetNS: ns, IfName: "eth0"}

	_, err = cni.AddNetworkList(ctx, list, rt)
	require.NoError(t, err)

	exists, err := netns.LinkExists(n.Bridge)
	require.NoError(t, err)
	assert.True(t, exists, "bridge %s on the host", n.Bridge)

	addrs := AddrsIn(t, ns, "eth0")
	require.Len(t, addrs, 1)
	ip, _, err := net.ParseCIDR(addrs[0])
	require.NoError(t, err)
	_, subnet, err := net.ParseCIDR(n.Subnet)
	require.NoError(t, err)
	assert.True(t, subnet.Contains(ip), "%s in %s", ip, n.Subnet)
	assert.Equal(t, []string{ip.String()}, Reservations(t, dataDir, "e2e"))
	assert.Nil(t, AddrsIn(t, ns, "eth1"))

	calls, err := calllog.Read(logFile)
	require.NoError(t, err)
	adds := calllog.Filter(calls, "ADD")
	require.Len(t, adds, 1)
	assert.Equal(t, ns, adds[0].NetNS)
	assert.NotEmpty(t, adds[0].PrevResult()["ips"], "bridge result chained into the recorder")

	require.NoError(t, cni.DelNetworkList(ctx, list, rt))
	assert.Empty(t, Reservations(t, dataDir, "e2e"))
	assert.Nil(t, AddrsIn(t, ns, "eth0"))
	assert.Len(t, calllog.Filter(mustRead(t, logFile), "DEL"), 1)
}

func mustRead(t *testing.T, path string) []calllog.Call {
	t.Helper()
	calls, err := calllog.Read(path)
	require.NoError(t, err)
	return calls
}
