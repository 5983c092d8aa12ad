package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file holds the tests of a sick cache file system: read-only, full,
// or with a lock dir that cannot be made. A teardown runs every DEL
// whatever the lock files can do, and what it could not record is
// finished in the background once the file system is well again.

// sickCacheEnv is an itEnv whose cache dir is a tmpfs of its own, which
// the test can remount read-only; the host-local data dir stays where it
// was, on a file system the plugins can write.
func sickCacheEnv(t *testing.T) *itEnv {
	t.Helper()
	e := newITEnv(t)
	e.cacheDir = filepath.Join(testenv.Tmpfs(t, 8<<20), "cache")
	require.NoError(t, os.Mkdir(e.cacheDir, 0o700))
	return e
}

// remount remounts the tmpfs of dir read-only, or read-write again.
func remount(t *testing.T, dir string, readOnly bool) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", flags, ""), "remount %s", dir)
	if readOnly {
		t.Cleanup(func() { _ = unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "") })
	}
}

// A pod set up before its cache dir fell sick is torn down: every DEL
// runs (the address and the veth go, host-local's reservation is
// released). What could not be recorded is reported with an error
// matching ErrStateNotRecorded (on a read-only file system, always) and
// finished once the file system is well again, with no further call:
// the record, the cache entry and the lock file go.
func TestTeardownOnSickCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// fall makes the cache dir's file system (mnt) sick and returns
		// what makes it well again; mustFail says that a teardown must
		// fail to record.
		fall     func(t *testing.T, mnt string) (heal func())
		mustFail bool
	}{
		{name: "read-only", mustFail: true, fall: func(t *testing.T, mnt string) func() {
			t.Helper()
			remount(t, mnt, true)
			return func() { remount(t, mnt, false) }
		}},
		{name: "full", fall: func(t *testing.T, mnt string) func() {
			t.Helper()
			filler := filepath.Join(mnt, "filler")
			testenv.FillTo(t, filler, 0)
			return func() { require.NoError(t, os.Remove(filler)) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := sickCacheEnv(t)
			n := e.bridgeNet("net", "1.0.0")
			m := e.start(WithHealing(fastHeal))
			pod := e.pod("p")
			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			require.NotEmpty(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
			require.Len(t, bridgePorts(t, n.Bridge), 1, "the pod's veth")

			heal := tc.fall(t, filepath.Dir(e.cacheDir))
			err = m.TearDownPodWithContext(e.ctx(), pod)
			if tc.mustFail || err != nil {
				require.ErrorIs(t, err, ErrStateNotRecorded)
			}
			e.assertDELRan(pod, n)
			if tc.mustFail {
				assert.NotEmpty(t, e.cacheFiles(), "nothing could be removed from a read-only cache")
			}

			heal()
			require.Eventually(t, func() bool {
				return len(e.cacheFiles()) == 0 && !exists(filepath.Join(e.cacheDir, "ocicni", "locks", pod.ID))
			}, 30*time.Second, 10*time.Millisecond, "the background finished the teardown\n%s", e.managerLog())
			e.assertClean(pod, "net")
		})
	}
}

// assertDELRan checks that the pod's DEL on the bridge network n ran:
// eth0 and the veth are gone, and host-local released the address.
func (e *itEnv) assertDELRan(pod PodNetwork, n testenv.Net) {
	e.t.Helper()
	assert.Equal(e.t, []string{"lo"}, linksIn(e.t, pod.NetNS), "DEL ran: eth0 is gone")
	assert.Empty(e.t, bridgePorts(e.t, n.Bridge), "the veth is gone")
	assert.Empty(e.t, testenv.Reservations(e.t, e.dataDir, "net"), "host-local released the address")
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// A lock dir that cannot be made (a file stands where it goes) keeps no
// teardown from running its DELs: the lock layer is reported degraded,
// in Health, in the log once and in the gauge, and a setup refuses with
// ErrLocksUnavailable. Once the dir can be made again, the next operation
// uses the lock files and the report clears.
func TestTeardownWithoutLockDir(t *testing.T) {
	t.Parallel()
	te := newTelEnv(t)
	n := te.bridgeNet("net", "1.0.0")
	m := te.start()
	pods := []PodNetwork{te.pod("a"), te.pod("b")}
	for _, pod := range pods {
		_, err := m.SetUpPodWithContext(te.ctx(), pod)
		require.NoError(t, err)
	}
	lockDir := filepath.Join(te.cacheDir, "ocicni", "locks")
	require.NoError(t, os.RemoveAll(lockDir))
	require.NoError(t, os.WriteFile(lockDir, []byte("not a dir"), 0o600))

	for _, pod := range pods {
		require.NoError(t, m.TearDownPodWithContext(te.ctx(), pod))
	}
	for _, pod := range pods {
		te.assertClean(pod, "net")
	}
	assert.Empty(t, bridgePorts(t, n.Bridge), "the veths are gone")
	h := m.Health()
	assert.True(t, h.LocksDegraded)
	require.ErrorIs(t, h.LocksError, syscall.ENOTDIR)
	assert.Equal(t, int64(1), total[int64](t, te.collect(), telemetry.MetricDegraded,
		attribute.String(telemetry.AttrDegradedPart, telemetry.DegradedLocks)))
	warned := 0
	for _, entry := range te.log.AllEntries() {
		if strings.Contains(entry.Message, "lock files cannot be used") {
			warned++
		}
	}
	assert.Equal(t, 1, warned, "said once, not per operation")

	_, err := m.SetUpPodWithContext(te.ctx(), te.pod("c"))
	require.ErrorIs(t, err, ErrLocksUnavailable, "a setup does not run unlocked")
	assert.Empty(t, testenv.Reservations(t, te.dataDir, "net"), "nothing ran")

	require.NoError(t, os.Remove(lockDir))
	pod := te.pod("d")
	_, err = m.SetUpPodWithContext(te.ctx(), pod)
	require.NoError(t, err)
	assert.False(t, m.Health().LocksDegraded, "the lock files work again")
	assert.Equal(t, int64(0), total[int64](t, te.collect(), telemetry.MetricDegraded,
		attribute.String(telemetry.AttrDegradedPart, telemetry.DegradedLocks)))
	require.NoError(t, m.TearDownPodWithContext(te.ctx(), pod))
	te.assertClean(pod, "net")
}

// A teardown whose DEL the caller's deadline cuts short leaves the
// sandbox's record, for the retry; once a retry succeeds, by the runtime
// or by the healer, nothing of the sandbox is left in the cache dir, its
// lock file included.
func TestTeardownCutShortThenRetriedLeavesNoLockFile(t *testing.T) {
	t.Parallel()
	for _, byHealer := range []bool{false, true} {
		name := "retried by the runtime"
		if byHealer {
			name = "retried by the healer"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			flag := faultFlag(t)
			e.recordedBridge("net", map[string]any{"del": map[string]any{"sleepMs": 5000, "onlyIfExists": flag}})
			opts := []Option{}
			if byHealer {
				opts = append(opts, WithHealing(fastHeal))
			}
			m := e.start(opts...)
			pod := e.pod("p")
			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			lockFile := filepath.Join(e.cacheDir, "ocicni", "locks", pod.ID)
			require.FileExists(t, lockFile)

			ctx, cancel := context.WithTimeout(e.ctx(), 300*time.Millisecond)
			defer cancel()
			require.Error(t, m.TearDownPodWithContext(ctx, pod), "the deadline cut the DEL short")
			require.NoError(t, os.Remove(flag))
			if byHealer {
				require.Eventually(t, func() bool { return len(e.cacheFiles()) == 0 && !exists(lockFile) },
					30*time.Second, 10*time.Millisecond, "the healer finished the teardown\n%s", e.managerLog())
			} else {
				require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			}
			e.assertClean(pod, "net")
			assert.NoFileExists(t, lockFile, "the lock file goes with the sandbox")
		})
	}
}

// A state dir (<cache dir>/ocicni) that is a symlink to a directory
// outside the cache dir is never written through: a setup refuses, naming
// the path, before any plugin runs; a teardown of a pod set up before the
// link was made runs its DELs and reports, naming the path, that it could
// not record them; the directory the link leads to is left as it was.
func TestSymlinkedStateDirIsNeverWrittenThrough(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	n := e.bridgeNet("net", "1.0.0")
	m := e.start()
	pod := e.pod("before")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	state := filepath.Join(e.cacheDir, "ocicni")
	outside := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.Rename(state, outside))
	require.NoError(t, os.Symlink(outside, state))
	before := testenv.Tree(t, outside)

	_, err = m.SetUpPodWithContext(e.ctx(), e.pod("after"))
	require.ErrorIs(t, err, ErrLocksUnavailable)
	require.ErrorIs(t, err, cache.ErrSymlinkedState)
	assert.Contains(t, err.Error(), state, "the error names the link")

	err = m.TearDownPodWithContext(e.ctx(), pod)
	require.ErrorIs(t, err, ErrStateNotRecorded)
	require.ErrorIs(t, err, cache.ErrSymlinkedState)
	assert.Contains(t, err.Error(), state)
	e.assertDELRan(pod, n)
	assert.Equal(t, before, testenv.Tree(t, outside), "nothing was written or removed through the link")
	h := m.Health()
	assert.True(t, h.LocksDegraded)
	require.ErrorIs(t, h.LocksError, cache.ErrSymlinkedState)

	// The operator puts the real dir back: what the teardown left is
	// finished by the next one.
	require.NoError(t, os.Remove(state))
	require.NoError(t, os.Rename(outside, state))
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "net")
}
