//go:build linux

package netns_test

import (
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

func TestDoRejectsBadPaths(t *testing.T) {
	noop := func() error { return nil }
	assert.Error(t, netns.Do("relative/ns", noop))
	err := netns.Do("/nonexistent/netns/path", noop)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	err = netns.Do(t.TempDir(), noop)
	assert.ErrorIs(t, err, netns.ErrNotNetNS)
}

func TestNewDoRemove(t *testing.T) {
	requireRoot(t)
	path, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Remove(path) })

	hostIfaces, err := os.ReadDir("/sys/class/net")
	require.NoError(t, err)

	var names []string
	require.NoError(t, netns.Do(path, func() error {
		require.NoError(t, netns.SetUp("lo"))
		iface, addrs, err := netns.Addrs("lo")
		if err != nil {
			return err
		}
		assert.NotZero(t, iface.Flags&1, "lo must be up")
		assert.NotEmpty(t, addrs, "lo gets 127.0.0.1 once up")
		ok, err := netns.LinkExists("lo")
		assert.True(t, ok)
		ents, _ := os.ReadDir("/proc/self/net/dev")
		_ = ents
		names = append(names, iface.Name)
		return err
	}))
	assert.Equal(t, []string{"lo"}, names)
	assert.ErrorIs(t, netns.Do(path, func() error { return netns.SetUp("nope0") }), netns.ErrLinkNotFound)

	// The caller's namespace is unchanged.
	after, err := os.ReadDir("/sys/class/net")
	require.NoError(t, err)
	assert.Len(t, after, len(hostIfaces))

	require.NoError(t, netns.Remove(path))
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, netns.Remove(path), "removing twice is fine")
	assert.ErrorIs(t, netns.Do(path, func() error { return nil }), fs.ErrNotExist)
}

func TestDeleteLinkMissingIsNil(t *testing.T) {
	requireRoot(t)
	path, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Remove(path) })
	require.NoError(t, netns.Do(path, func() error { return netns.DeleteLink("absent0") }))
}
