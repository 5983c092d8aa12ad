package cni_test

import (
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

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// The face's Shutdown is the engine's, with its bound: a short-lived
// process (an OCI hook) that exits through it is not held up by a plugin
// that never answers VERSION, and leaves no plugin running.
func TestFaceShutdownCutsVersionCallsShort(t *testing.T) {
	binDir := t.TempDir()
	pidFile := filepath.Join(binDir, "mute.pid")
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s\nexec sleep 600\n", pidFile)
	require.NoError(t, os.WriteFile(filepath.Join(binDir, "mute"), []byte(script), 0o755))

	c, err := cni.New(cni.WithPluginDir([]string{binDir}),
		cni.WithConfListBytes(ocicnitest.Conflist("mute", "1.0.0", "mute")),
		cni.WithEngineOptions(ocicni.WithCacheDir(t.TempDir())))
	require.NoError(t, err)
	f, ok := c.(*cni.Face)
	require.True(t, ok)

	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the plugin's VERSION call did not start")
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // only if the test failed

	for range 2 { // the second has nothing left to stop
		start := time.Now()
		require.NoError(t, f.Shutdown())
		assert.Less(t, time.Since(start), time.Second, "Shutdown took too long")
	}
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}, 5*time.Second, 5*time.Millisecond, "plugin process %d is still there", pid)
	require.Len(t, f.Engine().Skipped(), 1)
	for _, sk := range f.Engine().Skipped() {
		require.ErrorIs(t, sk, ocicni.ErrVersionPending)
	}
}
