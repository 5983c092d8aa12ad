package ocicni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// shutdownBound is how long Shutdown may take with plugins that never
// answer VERSION: the bound that CRI-O's manager swaps and short-lived
// processes exiting through Shutdown rely on.
const shutdownBound = time.Second

// mutePlugin installs, in binDir, a plugin of type typ that never answers:
// it writes its pid to pidFile(typ) (the sign that its VERSION call has
// started) and sleeps for ten minutes, as the same process.
func mutePlugin(t *testing.T, binDir, typ string) {
	t.Helper()
	pid := pidFile(binDir, typ)
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s\nexec sleep 600\n", pid)
	require.NoError(t, os.WriteFile(filepath.Join(binDir, typ), []byte(script), 0o755))
}

// pidFile is where the plugin typ of mutePlugin writes its pid.
func pidFile(binDir, typ string) string { return filepath.Join(binDir, typ+".pid") }

// waitPlugin waits until the plugin typ of mutePlugin has started, and
// returns its pid. It removes the pid file, so that the next start of the
// plugin can be told from this one.
func waitPlugin(t *testing.T, binDir, typ string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile(binDir, typ))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "plugin %s did not start", typ)
	require.NoError(t, os.Remove(pidFile(binDir, typ)))
	return pid
}

// requireGone waits until no process has pid: the plugin was killed and
// reaped (a zombie still answers signal 0).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, 5*time.Second, 5*time.Millisecond, "plugin process %d is still there", pid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // only if the test failed before
}

// shutdownWithin calls Shutdown and requires it to return within
// shutdownBound.
func shutdownWithin(t *testing.T, shutdown func() error) {
	t.Helper()
	start := time.Now()
	require.NoError(t, shutdown())
	took := time.Since(start)
	t.Logf("Shutdown returned after %v", took)
	assert.Less(t, took, shutdownBound, "Shutdown took too long")
}

// Shutdown returns within its bound while plugins of the conf dir never
// answer VERSION: it kills them, and leaves none running. A VERSION call
// that it cut short is not remembered as a failure: the network stays
// pending, and a reload after Shutdown asks the plugin again (which a
// second Shutdown cuts short in turn).
func TestShutdownCutsVersionCallsShort(t *testing.T) {
	tests := []struct {
		name string
		mute []string // plugin types that never answer, one network each
	}{
		{name: "one plugin never answers", mute: []string{"mute"}},
		{name: "two plugins never answer", mute: []string{"mute1", "mute2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			confDir, binDir := t.TempDir(), t.TempDir()
			for i, typ := range tt.mute {
				mutePlugin(t, binDir, typ)
				writeConf(t, confDir, fmt.Sprintf("%02d-%s.conflist", i, typ), conflist(typ, "1.0.0", typ))
			}
			m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(t.TempDir()))
			require.NoError(t, err)

			pids := make([]int, 0, len(tt.mute))
			for _, typ := range tt.mute {
				pids = append(pids, waitPlugin(t, binDir, typ))
			}
			shutdownWithin(t, m.Shutdown)
			for _, pid := range pids {
				requireGone(t, pid)
			}
			requirePending(t, m, tt.mute)

			// The manager serves on: a reload asks the plugins again.
			require.NoError(t, m.Reload(context.Background()))
			requirePending(t, m, tt.mute)
			pids = pids[:0]
			for _, typ := range tt.mute {
				pids = append(pids, waitPlugin(t, binDir, typ))
			}
			shutdownWithin(t, m.Shutdown)
			for _, pid := range pids {
				requireGone(t, pid)
			}
			shutdownWithin(t, m.Shutdown) // nothing left to stop
			requirePending(t, m, tt.mute)
		})
	}
}

// requirePending requires each network (named after its plugin type) to
// be skipped as waiting for VERSION: never as failed because Shutdown cut
// its call short.
func requirePending(t *testing.T, m *Manager, networks []string) {
	t.Helper()
	assert.Empty(t, m.Networks())
	require.Len(t, m.Skipped(), len(networks))
	for _, sk := range m.Skipped() {
		require.ErrorIs(t, sk, ErrVersionPending)
		require.NotErrorIs(t, sk, ErrVersionFailed)
	}
}

// An executor that ignores its context (one of WithExec may) does not hold
// Shutdown up either: the VERSION call runs on, and its late answer is
// dropped rather than remembered, so a reload after Shutdown asks again.
// A lookup that waits for the answer gives up once Shutdown has cut the
// call short, since no answer is coming.
func TestShutdownDoesNotWaitForAnExecutorThatIgnoresIt(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "hang")
	writeConf(t, e.confDir, "10-hang.conflist", conflist("hang", "1.0.0", "hang"))
	g := e.exec.Gate(fakecni.Match{Verb: "VERSION", PluginType: "hang"}, fakecni.IgnoreContext())
	m := e.managerWithin(t, loadBound, withVersionWait(50*time.Millisecond))
	t.Cleanup(g.Release)
	g.WaitEntered(t, 1)
	require.ErrorIs(t, skippedFile(m, filepath.Join(e.confDir, "10-hang.conflist")), ErrVersionPending)

	found := make(chan error, 1)
	go func() {
		_, _, err := m.e.lookup(context.Background(), m.e.snapshot(), "hang")
		found <- err
	}()
	shutdownWithin(t, m.Shutdown)
	select {
	case err := <-found:
		require.ErrorIs(t, err, ErrNetworkNotFound)
		require.ErrorIs(t, err, ErrVersionPending)
	case <-time.After(loadBound):
		require.FailNow(t, "the lookup still waits for an answer that Shutdown cut short")
	}

	g.Release() // the late answer: dropped
	testenv.Within(t, loadBound, "reload", func() { assert.NoError(t, m.Reload(context.Background())) })
	assert.Equal(t, []string{"hang"}, m.Networks(), "the network loads from a new VERSION call")
	assert.Equal(t, 2, e.versionCalls("hang"), "the call cut short was forgotten")
}
