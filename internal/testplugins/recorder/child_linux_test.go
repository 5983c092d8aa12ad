package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

func TestChildPidFile(t *testing.T) {
	cases := []struct {
		name      string
		verb, key string
		behaviour map[string]any
		wantExit  int
		wantOut   map[string]any // stdout as JSON; nil for none
	}{
		{"ADD goes on to print its result", "ADD", "add", map[string]any{"emptyResult": true}, 0, map[string]any{"cniVersion": "1.0.0"}},
		{"DEL goes on to fail", "DEL", "del", map[string]any{"errorCode": 11, "errorMsg": "later"}, 1, map[string]any{"code": 11.0, "msg": "later"}},
		{"the child starts before the sleep", "CHECK", "check", map[string]any{"sleepMs": 300}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			tc.behaviour["childPidFile"] = pidFile
			logFile := filepath.Join(dir, "calls.jsonl")
			c := conf(t, "1.0.0", logFile, map[string]any{tc.key: tc.behaviour})

			// stdout is a file, not a pipe, so the run ends when the
			// plugin exits even though the child holds stdout open.
			outPath := filepath.Join(dir, "stdout")
			out, err := os.Create(outPath)
			require.NoError(t, err)
			t.Cleanup(func() { _ = out.Close() })
			cmd := exec.Command(pluginPath)
			cmd.Env = args(tc.verb).AsEnv()
			cmd.Stdin = bytes.NewReader(c)
			cmd.Stdout = out
			err = cmd.Run()
			end := time.Now()
			if tc.wantExit == 0 {
				require.NoError(t, err)
			} else {
				var exitErr *exec.ExitError
				require.ErrorAs(t, err, &exitErr)
				assert.Equal(t, tc.wantExit, exitErr.ExitCode())
			}

			// The pid file is written before the plugin exits.
			child := testenv.ReadPidFile(t, pidFile)
			require.NotZero(t, child, "pid file written")
			testenv.KillOnCleanup(t, child)
			st, err := os.Stat(pidFile)
			require.NoError(t, err)
			sleep, _ := tc.behaviour["sleepMs"].(int)
			assert.GreaterOrEqual(t, end.Sub(st.ModTime()), time.Duration(sleep)*time.Millisecond,
				"the pid file was written before the sleep")
			assert.NotEqual(t, cmd.Process.Pid, child)
			assert.False(t, testenv.ProcessGone(t, child), "the child outlives the plugin")
			fd1, err := os.Readlink("/proc/" + strconv.Itoa(child) + "/fd/1")
			require.NoError(t, err)
			assert.Equal(t, outPath, fd1, "the child holds the plugin's stdout")
			stdout, err := os.ReadFile(outPath)
			require.NoError(t, err)
			if tc.wantOut == nil {
				assert.Empty(t, stdout)
			} else {
				var got map[string]any
				require.NoError(t, json.Unmarshal(stdout, &got))
				assert.Equal(t, tc.wantOut, got)
			}

			calls, err := calllog.Read(logFile)
			require.NoError(t, err)
			require.Len(t, calls, 1, "the child logs no call")

			require.NoError(t, syscall.Kill(child, syscall.SIGKILL))
			testenv.RequireGone(t, child, "the child")
		})
	}
}
