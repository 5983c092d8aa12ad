package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withConfigGrace sets how old a saved config that no record uses must be
// for GC to remove it.
func withConfigGrace(d time.Duration) Option {
	return func(o *options) error {
		o.configGrace = d
		return nil
	}
}

// Pods set up one after the other share one saved copy of their config:
// the teardown of the last pod that used it keeps it, so the next setup
// links it instead of writing it again (two more syncs). GC removes it
// once it is older than the grace, and not before.
func TestSavedConfigKeptForNextSetup(t *testing.T) {
	env := newFakeEnv(t)
	cacheDir, nsPath := env.cacheDir, env.nsPath
	newManager := func(opts ...Option) *Manager {
		m, _ := env.manager(t, opts...)
		return m
	}
	// copies returns the inode and link count of each saved copy.
	copies := func() map[uint64]uint64 {
		des, err := os.ReadDir(filepath.Join(cacheDir, "ocicni", "configs"))
		require.NoError(t, err)
		out := map[uint64]uint64{}
		for _, de := range des {
			fi, err := de.Info()
			require.NoError(t, err)
			st := fi.Sys().(*syscall.Stat_t)
			out[st.Ino] = uint64(st.Nlink)
		}
		return out
	}
	ctx := context.Background()
	m := newManager()
	var first map[uint64]uint64
	for i, id := range []string{"pod1", "pod2", "pod3"} {
		pod := PodNetwork{Name: id, Namespace: "ns", ID: id, NetNS: nsPath}
		_, err := m.SetUpPodWithContext(ctx, pod)
		require.NoError(t, err)
		linked := copies()
		require.Len(t, linked, 1)
		for _, n := range linked {
			assert.Equal(t, uint64(2), n, "the copy and the record's link")
		}
		require.NoError(t, m.TearDownPodWithContext(ctx, pod))
		if i == 0 {
			first = copies()
			require.Len(t, first, 1, "the teardown keeps the copy")
		}
		require.Equal(t, first, copies(), "%s: the same copy, kept and no longer linked", id)
		for _, n := range first {
			assert.Equal(t, uint64(1), n)
		}
	}

	require.NoError(t, m.GC(ctx, nil))
	require.Equal(t, first, copies(), "GC keeps a copy younger than the grace")
	require.NoError(t, m.Shutdown())

	m = newManager(withConfigGrace(0))
	require.NoError(t, m.GC(ctx, nil))
	assert.Empty(t, copies(), "GC removes a copy no record uses once it is older than the grace")
}
