//go:build linux

package netns_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

// requireRoot is testenv.RequireRoot, which this package cannot import
// (testenv imports it): it skips without root, or fails where CI requires
// root tests to run.
func requireRoot(t *testing.T) {
	t.Helper()
	switch {
	case os.Geteuid() == 0:
	case os.Getenv("OCICNI_TEST_REQUIRE_ROOT") != "":
		t.Fatal("needs root, and $OCICNI_TEST_REQUIRE_ROOT says this run must not skip it")
	default:
		t.Skip("needs root")
	}
}

func TestDoRejectsBadPaths(t *testing.T) {
	noop := func() error { return nil }
	require.Error(t, netns.Do("relative/ns", noop))
	err := netns.Do("/nonexistent/netns/path", noop)
	require.ErrorIs(t, err, fs.ErrNotExist)
	err = netns.Do(t.TempDir(), noop)
	require.ErrorIs(t, err, netns.ErrNotNetNS)
}

func TestNewDoRemove(t *testing.T) {
	requireRoot(t)
	path, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Remove(path) })

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := os.Readlink("/proc/thread-self/ns/net")
	require.NoError(t, err)

	var names []string
	require.NoError(t, netns.Do(path, func() error {
		if err := netns.SetUp("lo"); err != nil {
			return err
		}
		iface, addrs, err := netns.Addrs("lo")
		if err != nil {
			return err
		}
		assert.NotZero(t, iface.Flags&net.FlagUp, "lo must be up")
		assert.NotEmpty(t, addrs, "lo gets 127.0.0.1 once up")
		ok, err := netns.LinkExists("lo")
		assert.True(t, ok)
		names = append(names, iface.Name)
		return err
	}))
	assert.Equal(t, []string{"lo"}, names)
	require.ErrorIs(t, netns.Do(path, func() error { return netns.SetUp("nope0") }), netns.ErrLinkNotFound)

	// Do runs fn on a thread of its own, and gives that thread back to the
	// scheduler only after moving it back to the caller's namespace;
	// otherwise any goroutine could later run inside the pod's namespace.
	// (A thread that could not be restored is discarded, which is fine.)
	var inside string
	var tid int
	require.NoError(t, netns.Do(path, func() error {
		tid = unix.Gettid()
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}))
	assert.NotEqual(t, before, inside, "Do ran inside the other namespace")
	after, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
		assert.Equal(t, before, after, "the thread that ran fn is back in the caller's namespace")
	}

	require.NoError(t, netns.Remove(path))
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, netns.Remove(path), "removing twice is fine")
	require.ErrorIs(t, netns.Do(path, func() error { return nil }), fs.ErrNotExist)
}

func TestDeleteLinkMissingIsNil(t *testing.T) {
	requireRoot(t)
	path, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Remove(path) })
	require.NoError(t, netns.Do(path, func() error { return netns.DeleteLink("absent0") }))
}

// TestNewLeavesNoThreadInside: after New and Do, no thread of the process
// is inside a namespace they made or entered, however many there were; a
// thread left inside (the main thread, which the runtime parks instead of
// ending) would keep the namespace and its interfaces alive after Remove.
// Before New put its thread back, the main thread landed in one of a few
// hundred new namespaces in every run.
func TestNewLeavesNoThreadInside(t *testing.T) {
	requireRoot(t)
	own, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", os.Getpid()))
	require.NoError(t, err)
	made := map[string]string{} // namespace id ("net:[inode]") to path
	for range 300 {
		path, err := netns.New()
		require.NoError(t, err)
		var id string
		require.NoError(t, netns.Do(path, func() error {
			id, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		}))
		made[id] = path
		require.NoError(t, netns.Remove(path))
	}
	require.NotContains(t, made, own)
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		id, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		require.NoError(t, err)
		assert.NotContains(t, made, id, "thread %s is inside namespace %s, made at %s", task.Name(), id, made[id])
	}
}

// ThreadNS gives no handle on a thread in the process's namespace, and a
// handle of the thread's own namespace inside another one.
func TestThreadNS(t *testing.T) {
	requireRoot(t)
	f, err := netns.ThreadNS()
	require.NoError(t, err)
	assert.Nil(t, f, "the process's namespace")

	path, err := netns.New()
	require.NoError(t, err)
	defer func() { assert.NoError(t, netns.Remove(path)) }()
	var want, got unix.Stat_t
	require.NoError(t, unix.Stat(path, &want))
	require.NoError(t, netns.Do(path, func() error {
		f, err := netns.ThreadNS()
		if err != nil {
			return err
		}
		if f == nil {
			return errors.New("no handle inside another namespace")
		}
		defer f.Close()
		return unix.Fstat(int(f.Fd()), &got)
	}))
	assert.Equal(t, want.Ino, got.Ino, "the handle names the namespace entered")
}

// After New, RunDir is a shared mount point of its own, as "ip netns add"
// leaves it, so that a later "ip netns add" does not mount it over the
// pins New made.
func TestNewSharesRunDir(t *testing.T) {
	requireRoot(t)
	path, err := netns.New()
	require.NoError(t, err)
	defer func() { assert.NoError(t, netns.Remove(path)) }()
	info, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	shared := false
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && f[4] == netns.RunDir && strings.Contains(strings.Join(f[6:], " "), "shared:") {
			shared = true
		}
	}
	assert.True(t, shared, "%s is a shared mount point in\n%s", netns.RunDir, info)
}
