package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

var pluginDir string

func TestMain(m *testing.M) { os.Exit(testenv.MainWithPlugins(m, &pluginDir)) }

// TestRunAgainstRealPlugins runs the program's flow on a real bridge
// network and checks that nothing is left behind.
func TestRunAgainstRealPlugins(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	confDir, cacheDir, dataDir := filepath.Join(dir, "net.d"), filepath.Join(dir, "cache"), filepath.Join(dir, "ipam")
	require.NoError(t, os.MkdirAll(confDir, 0o755))
	n := testenv.Alloc(t)
	testenv.WriteFile(t, confDir, "10-compat.conflist", testenv.BridgeConflist("compat", "1.0.0", n, dataDir))
	nsPath := testenv.NewNS(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, confDir, pluginDir, cacheDir, nsPath))
	assert.Empty(t, testenv.Reservations(t, dataDir, "compat"))
	assert.Nil(t, testenv.AddrsIn(t, nsPath, "eth0"))
	left, _ := os.ReadDir(filepath.Join(cacheDir, "results"))
	assert.Empty(t, left)
}
