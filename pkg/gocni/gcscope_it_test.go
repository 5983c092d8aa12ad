package cni_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// TestRealGCLeavesOtherNetworks is BuildKit's GC at start on a host where
// another runtime shares the cache dir: two faces on one cache dir, each
// with its own network (bridge + host-local, its own bridge, subnet and
// data dir), each set up a sandbox; face A's GC with no valid sandbox
// releases A's sandbox, and B's keeps its reservation, its eth0 address
// and its cache entry, so that B's Remove still releases them afterwards.
func TestRealGCLeavesOtherNetworks(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cacheDir := t.TempDir()
	netA, dataA := testenv.Alloc(t), t.TempDir()
	netB, dataB := testenv.Alloc(t), t.TempDir()
	faceA := newSharedCacheFace(t, cacheDir, testenv.BridgeConflist("gcscope-a", "1.1.0", netA, dataA))
	faceB := newSharedCacheFace(t, cacheDir, testenv.BridgeConflist("gcscope-b", "1.1.0", netB, dataB))
	const idA, idB = "gocni-gcscope-a", "gocni-gcscope-b"

	nsB := testenv.NewNS(t)
	res, err := faceB.Setup(ctx, idB, nsB)
	require.NoError(t, err)
	require.NotEmpty(t, res.Interfaces["eth0"].IPConfigs)
	ipB := res.Interfaces["eth0"].IPConfigs[0].IP.String()
	nsA := testenv.NewNS(t)
	_, err = faceA.Setup(ctx, idA, nsA)
	require.NoError(t, err)
	require.Len(t, testenv.Reservations(t, dataA, "gcscope-a"), 1)

	require.NoError(t, faceA.GC(ctx, nil), "nothing of B's is A's GC's to act on, or to report")

	assert.Empty(t, testenv.Reservations(t, dataA, "gcscope-a"), "A's reservation is released")
	assert.Nil(t, testenv.AddrsIn(t, nsA, "eth0"), "A's eth0 is gone")
	assert.Empty(t, inventoryOf(t, faceA, idA).Attachments, "nothing of A's sandbox is left")

	assert.Equal(t, []string{ipB}, testenv.Reservations(t, dataB, "gcscope-b"), "B keeps its reservation")
	assert.Equal(t, []string{ipB + "/24"}, testenv.AddrsIn(t, nsB, "eth0"), "B's eth0 keeps its address")
	invB := inventoryOf(t, faceB, idB)
	require.Len(t, invB.Attachments, 1)
	assert.Equal(t, ocicni.NetAttachment{Name: "gcscope-b", Ifname: "eth0"}, invB.Attachments[0].NetAttachment)
	assert.NotNil(t, invB.Attachments[0].Entry, "B keeps its cache entry")
	assert.NotNil(t, invB.Attachments[0].Record, "B keeps its order record")

	require.NoError(t, faceB.Remove(ctx, idB, nsB))
	assert.Empty(t, testenv.Reservations(t, dataB, "gcscope-b"), "B's Remove releases its reservation")
	assert.Nil(t, testenv.AddrsIn(t, nsB, "eth0"), "B's eth0 is gone")
	assert.Empty(t, inventoryOf(t, faceB, idB).Attachments)
}

// newSharedCacheFace returns a face that loads conflist alone and keeps
// its engine's cache in cacheDir, shut down with the test.
func newSharedCacheFace(t *testing.T, cacheDir, conflist string) *cni.Face {
	t.Helper()
	c, err := cni.New(
		cni.WithPluginDir([]string{pluginDir}),
		cni.WithConfListBytes([]byte(conflist)),
		cni.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing()),
	)
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	return f
}

// inventoryOf returns what f's engine knows of sandbox id.
func inventoryOf(t *testing.T, f *cni.Face, id string) *ocicni.SandboxInventory {
	t.Helper()
	inv, err := f.Engine().Inventory(id)
	require.NoError(t, err)
	return inv
}
