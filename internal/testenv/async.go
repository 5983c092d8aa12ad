package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/require"
)

// Script writes an executable shell script with body, to be run as a
// plugin, and returns its path.
func Script(tb testing.TB, body string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "plugin.sh")
	require.NoError(tb, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// WaitPid waits for a script to write a pid to path and makes sure that
// that process does not outlive the test. The deadline, [BarrierTimeout],
// bounds how long a plugin may take to start on a loaded machine; a pid
// file with something else than a pid in it fails at once.
func WaitPid(tb testing.TB, path string) int {
	tb.Helper()
	var pid int
	var err error
	// The check runs in a goroutine of require.Eventually, where the test
	// must not fail: it reports to this one.
	require.Eventually(tb, func() bool {
		pid, err = readPidFile(path)
		return pid != 0 || err != nil
	}, BarrierTimeout, 5*time.Millisecond, "pid file %s", path)
	require.NoError(tb, err)
	KillOnCleanup(tb, pid)
	return pid
}

// RequireGone waits for process pid, described by what, to be gone; the
// deadline, [BarrierTimeout], bounds how long a killed process may take
// to end on a loaded machine.
func RequireGone(tb testing.TB, pid int, what string) {
	tb.Helper()
	var err error
	require.Eventually(tb, func() bool {
		var gone bool
		gone, err = processGone(pid)
		return gone || err != nil
	}, BarrierTimeout, 5*time.Millisecond, "%s (pid %d) is still running", what, pid)
	require.NoError(tb, err)
}

// ExecAsync runs e.ExecPlugin in a goroutine and returns its error
// channel, for [RequireReturns].
func ExecAsync(ctx context.Context, e invoke.Exec, pluginPath string, stdin []byte, environ []string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := e.ExecPlugin(ctx, pluginPath, stdin, environ)
		done <- err
	}()
	return done
}

// RequireReturns waits for an operation started in a goroutine, which
// must return once its context has ended, and returns its error.
func RequireReturns(tb testing.TB, done <-chan error) error {
	tb.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		require.FailNow(tb, "the operation did not return after its context ended")
		return nil
	}
}

// RequireDone waits, up to [BarrierTimeout], for an operation started in
// a goroutine and returns its error; what names the operation in the
// failure.
func RequireDone(tb testing.TB, done <-chan error, what string) error {
	tb.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(BarrierTimeout):
		require.FailNow(tb, what+" did not return")
		return nil
	}
}

// RequirePending fails the test if the operation behind done has
// returned.
func RequirePending(tb testing.TB, done <-chan error, msg string) {
	tb.Helper()
	select {
	case err := <-done:
		require.FailNow(tb, msg, "it returned err=%v", err)
	default:
	}
}
