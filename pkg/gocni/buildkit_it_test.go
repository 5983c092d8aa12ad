package cni_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// BuildKit's cniprovider, in its cni network mode: New with the
// minimum of 2, the loopback network and one conflist file, prefix "eth".
// The build step's interface is eth1, and Result.Interfaces holds exactly
// one key starting with "veth": the host end of the step's veth, a link
// on the host enslaved to the bridge, whose counters BuildKit samples.
// Remove removes that link and releases the reservation.
func TestRealBuildKitProviderResult(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := testenv.Alloc(t)
	dataDir := t.TempDir()
	conf := testenv.WriteFile(t, t.TempDir(), "buildkit.conflist", testenv.BridgeConflist("buildkit", "1.0.0", n, dataDir))
	c, err := cni.New(
		cni.WithMinNetworkCount(2),
		cni.WithPluginDir([]string{pluginDir}), cni.WithInterfacePrefix("eth"),
		cni.WithLoNetwork, cni.WithConfListFile(conf),
		cni.WithEngineOptions(ocicni.WithCacheDir(t.TempDir()), ocicni.WithoutHealing()),
	)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.(*cni.Face).Shutdown()) })
	require.NoError(t, c.Status())

	ns := testenv.NewNS(t)
	res, err := c.Setup(ctx, "buildkitstep1", ns)
	require.NoError(t, err)
	keys := make([]string, 0, len(res.Interfaces))
	var veths []string
	for k := range res.Interfaces {
		keys = append(keys, k)
		if strings.HasPrefix(k, "veth") {
			veths = append(veths, k)
		}
	}
	sort.Strings(keys)
	require.Len(t, veths, 1, "one veth key in %v", keys)
	// eth0 is go-cni's default interface, which its results always list
	// (empty here: no IP names it).
	assert.ElementsMatch(t, []string{"lo", "eth0", "eth1", n.Bridge, veths[0]}, keys)
	assert.Empty(t, res.Interfaces["eth0"].IPConfigs)

	require.NotEmpty(t, res.Interfaces["eth1"].IPConfigs)
	ip := res.Interfaces["eth1"].IPConfigs[0].IP
	_, subnet, err := net.ParseCIDR(n.Subnet)
	require.NoError(t, err)
	assert.True(t, subnet.Contains(ip), "%s in %s", ip, n.Subnet)
	assert.Equal(t, []string{ip.String() + "/24"}, testenv.AddrsIn(t, ns, "eth1"))
	assert.Nil(t, testenv.AddrsIn(t, ns, "eth0"), "no eth0: lo is network 0")

	_, err = netns.LinkByName(veths[0])
	require.NoError(t, err, "the veth key is a host link")
	master, err := os.Readlink(filepath.Join("/sys/class/net", veths[0], "master"))
	require.NoError(t, err)
	assert.Equal(t, n.Bridge, filepath.Base(master), "enslaved to the bridge")
	_, err = os.Stat(filepath.Join("/sys/class/net", veths[0], "statistics", "tx_bytes"))
	require.NoError(t, err, "the counters BuildKit samples")

	require.NoError(t, c.Remove(ctx, "buildkitstep1", ns))
	exists, err := netns.LinkExists(veths[0])
	require.NoError(t, err)
	assert.False(t, exists, "the host end is gone")
	assert.Empty(t, testenv.Reservations(t, dataDir, "buildkit"))
}
