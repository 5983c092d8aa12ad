package ocicni

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// strandedNetNSEnv names, in the process TestPerProcessNetNSStrandedMainThread
// starts, the network namespace that init moves the main thread into.
const strandedNetNSEnv = "OCICNI_TEST_STRANDED_NETNS"

// strandErr is why init could not move the main thread, if it could not.
var strandErr error

// init strands the main thread in the namespace $OCICNI_TEST_STRANDED_NETNS
// names. Locked in init, the main thread runs main, and with it testing's
// main loop, and nothing else; the tests run on the other threads, which
// stay in the test's namespace. (LockOSThread starts the runtime's
// template thread first, so that threads started later do not inherit
// the stranded namespace.) There, /proc/self/ns/net names the stranded
// namespace for the manager, and the plugin's own one, the host's, for a
// plugin.
func init() {
	ns := os.Getenv(strandedNetNSEnv)
	if ns == "" {
		return
	}
	runtime.LockOSThread()
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		strandErr = err
		return
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	strandErr = unix.Setns(fd, unix.CLONE_NEWNET)
}

// The manager refuses /proc/self paths even when its main thread sits in
// another namespace than the calling thread and init. The old check, a
// stat compared with the calling thread's and init's namespaces, accepted
// /proc/self/ns/net there, and the plugins ran in their own namespace,
// the host's.
func TestPerProcessNetNSStrandedMainThread(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	ns := testenv.NewNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run=^TestPerProcessNetNSStrandedHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), strandedNetNSEnv+"="+ns, testenv.PluginDirEnv+"="+pluginDir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the helper failed:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestPerProcessNetNSStrandedHelper", "the helper ran:\n%s", out)
}

// TestPerProcessNetNSStrandedHelper runs in the process that
// TestPerProcessNetNSStrandedMainThread starts.
func TestPerProcessNetNSStrandedHelper(t *testing.T) {
	ns := os.Getenv(strandedNetNSEnv)
	if ns == "" {
		t.Skip("runs in the process TestPerProcessNetNSStrandedMainThread starts")
	}
	require.NoError(t, strandErr, "stranding the main thread in %s", ns)
	requireStranded(t, ns)

	for _, p := range perProcessNetNS {
		requirePerProcessRefusal(t, checkNetNS(p))
		_, err := usableStoredNetNS(p)
		requirePerProcessRefusal(t, err)
	}
	testPerProcessNetNS(t)
}

// requireStranded checks the premise of the helper: /proc/self/ns/net is
// ns, and neither this thread's namespace nor init's.
func requireStranded(t *testing.T, ns string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	stat := func(p string) os.FileInfo {
		t.Helper()
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi
	}
	self := stat("/proc/self/ns/net")
	require.True(t, os.SameFile(self, stat(ns)), "/proc/self/ns/net is the stranded namespace")
	require.False(t, os.SameFile(self, stat("/proc/thread-self/ns/net")), "a test thread is not in it")
	require.False(t, hostNetNS(self), "the old host check does not catch it")
}

// A procfs mounted elsewhere than /proc has its own self and thread-self,
// found by the file system type rather than by name.
func TestPerProcessNetNSPathOtherProcMount(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	mnt := t.TempDir()
	if err := unix.Mount("proc", mnt, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Skipf("cannot mount a procfs: %v", err)
	}
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH)) })

	for _, p := range []string{mnt + "/self/ns/net", mnt + "/thread-self/ns/net", mnt + "/net/dev"} {
		requirePerProcessRefusal(t, checkPerProcessPath(p))
	}
	require.NoError(t, checkPerProcessPath(mnt+"/1/ns/net"))
}
