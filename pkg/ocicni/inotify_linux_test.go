package ocicni

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// inotifyHelperEnv names the dir that TestInotifyHelper works in; unset,
// it skips.
const inotifyHelperEnv = "OCICNI_TEST_INOTIFY_HELPER"

// inotifyUID is the unprivileged user TestInotifyHelper runs as: inotify's
// limits are per user, so the helper uses up its own user's instances and
// no other process of the machine notices.
const inotifyUID = 64123

// With no inotify instance left for its user, a manager still starts: the
// InitCNI family and New succeed, the conf dir is polled, so a new config
// becomes the default within the poll interval, and Health says why.
// Once instances are free again, inotify takes over. The helper runs as
// a user of its own, whose instances it uses up itself, so that no other
// process on the machine is short of them.
func TestManagerStartsWithoutInotify(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir makes them 0700
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, os.Chown(dir, inotifyUID, inotifyUID))
	bin := filepath.Join(t.TempDir(), "ocicni.test") // the build dir is root's alone
	require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
	linkOrCopy(t, os.Args[0], bin)
	var out []byte
	var err error
	for range 50 {
		cmd := exec.Command(bin, "-test.run=^TestInotifyHelper$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), inotifyHelperEnv+"="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: inotifyUID, Gid: inotifyUID}}
		out, err = cmd.CombinedOutput()
		// A copy's write descriptor may live on in another test's child
		// between its fork and its exec: try again.
		if !errors.Is(err, syscall.ETXTBSY) {
			break
		}
	}
	require.NoError(t, err, "the helper:\n%s", out)
	assert.Contains(t, string(out), "--- PASS: TestInotifyHelper", "the helper ran:\n%s", out)
	t.Logf("the helper:\n%s", out)
}

// linkOrCopy makes to a hard link to from, or a copy where a link
// cannot be made, executable by all.
func linkOrCopy(t *testing.T, from, to string) {
	t.Helper()
	if fi, err := os.Stat(from); err == nil && fi.Mode().Perm()&0o005 == 0o005 && os.Link(from, to) == nil {
		return
	}
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

// TestInotifyHelper is TestManagerStartsWithoutInotify's other half, run
// in a process of its own as inotifyUID.
func TestInotifyHelper(t *testing.T) {
	dir := os.Getenv(inotifyHelperEnv)
	if dir == "" {
		t.Skip("run by TestManagerStartsWithoutInotify")
	}
	confDir, binDir, cacheDir := filepath.Join(dir, "net.d"), filepath.Join(dir, "bin"), filepath.Join(dir, "cache")
	for _, d := range []string{confDir, binDir, cacheDir} {
		require.NoError(t, os.Mkdir(d, 0o700))
	}
	var held []int
	closeHeld := func() {
		for _, fd := range held {
			_ = unix.Close(fd)
		}
		held = nil
	}
	defer closeHeld()
	for {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			require.ErrorIs(t, err, unix.EMFILE, "inotify instances used up")
			break
		}
		held = append(held, fd)
		require.Less(t, len(held), 1<<16, "fs.inotify.max_user_instances is not reached")
	}
	t.Logf("user %d holds %d inotify instances; none is left", os.Getuid(), len(held))

	plugin, err := InitCNIWithCache("", confDir, cacheDir, binDir)
	require.NoError(t, err, "the InitCNI family starts without inotify")
	require.NoError(t, plugin.Shutdown())

	logger, hook := test.NewNullLogger()
	m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(cacheDir), WithExec(fakecni.New()),
		WithoutHealing(), WithReloadDebounce(10*time.Millisecond), WithLogger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer func() { _ = m.Shutdown() }()
	h := m.Health()
	require.True(t, h.WatcherPolling)
	require.ErrorIs(t, h.WatcherError, unix.EMFILE)

	conf := func(name, network string) {
		testenv.WriteFile(t, confDir, name, testenv.Conflist(network, "1.0.0", `{"type":"bridge"}`))
	}
	start := time.Now()
	conf("20-late.conflist", "late")
	require.Eventually(t, func() bool { return m.GetDefaultNetworkName() == "late" }, 10*time.Second, time.Millisecond,
		"a new config becomes the default by polling")
	t.Logf("a new config was the default after %v (poll interval %v)", time.Since(start).Round(time.Millisecond), time.Second)

	closeHeld()
	require.Eventually(t, func() bool { return !m.Health().WatcherPolling }, 10*time.Second, time.Millisecond,
		"inotify takes over")
	conf("10-first.conflist", "first")
	require.Eventually(t, func() bool { return m.GetDefaultNetworkName() == "first" }, 10*time.Second, time.Millisecond)
	warned := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["component"] == "watcher" {
			warned++
		}
	}
	assert.Equal(t, 1, warned, "the fallback is logged once")
}
