package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

var (
	// toolBin is the ocicnitool binary, built once by TestMain.
	toolBin string
	// pluginDir holds the reference plugins and the recorder when the
	// tests run as root; it is empty otherwise.
	pluginDir string
)

// TestMain builds the tool (with -race when the tests have it), then runs
// the tests with the plugins built as root.
func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithBinary(progName, raceEnabled, &toolBin, func() int {
		return testenv.MainWithPlugins(m, &pluginDir)
	}))
}

// result is what one run of the tool did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runTool runs the tool with args and returns its exit code and output.
func runTool(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, toolBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A -race binary sleeps a second at exit unless told otherwise. A race
	// it detects still shows on stderr and in the exit code (66).
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s %s: %v", progName, strings.Join(args, " "), err)
	}
	return r
}

// mustRun runs the tool and requires exit code want.
func mustRun(t *testing.T, want int, args ...string) result {
	t.Helper()
	r := runTool(t, args...)
	require.Equal(t, want, r.code, "%s %s\n%s", progName, strings.Join(args, " "), r)
	return r
}

// decode parses the JSON document on the tool's stdout.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), "%s", r)
	return v
}

// copyDir copies the tree src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	require.NoError(t, err)
	return dst
}
