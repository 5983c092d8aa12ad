package pluginexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// blockedOnStdin reports whether process pid is blocked in read(2) on its
// stdin: with the pipe empty, it has received nothing yet.
func blockedOnStdin(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 1 && f[0] == strconv.Itoa(unix.SYS_READ) && f[1] == "0x0"
}

// The executor starts a plugin before the gate of its context opens, but
// the plugin reads nothing from stdin until it does; when the gate opens
// with an error, the plugin is killed without having read its config, and
// the run returns the gate's error. Deterministic: the plugin is seen
// blocked reading an empty stdin before the gate opens.
func TestGateHoldsBackStdin(t *testing.T) {
	require.True(t, GatesStdin(New(nil)), "the executor of New gates stdin on Linux")
	for _, tc := range []struct {
		name  string
		gate  error
		check func(t *testing.T, err error, conf []byte)
	}{
		{"opens", nil, func(t *testing.T, err error, conf []byte) {
			t.Helper()
			require.NoError(t, err)
			assert.JSONEq(t, `{"name":"net"}`, string(conf), "the config, once the gate opened")
		}},
		{"fails", errors.New("recording failed"), func(t *testing.T, err error, conf []byte) {
			t.Helper()
			require.EqualError(t, err, "recording failed")
			assert.Empty(t, conf, "the plugin never read its config")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The pid file comes through a rename, whole: the test never
			// reads it created but not yet written.
			plugin := testenv.Script(t, `echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"; exec cat > "$DIR/conf"`)
			e := New(nil)
			gate := NewGate()
			ctx := WithGate(context.Background(), gate)
			done := make(chan error, 1)
			go func() {
				_, err := e.ExecPlugin(ctx, plugin, []byte(`{"name":"net"}`), []string{"DIR=" + dir, "CNI_COMMAND=ADD"})
				done <- err
			}()
			pid := testenv.WaitPid(t, filepath.Join(dir, "pid"))
			require.Eventually(t, func() bool { return blockedOnStdin(t, pid) }, testenv.BarrierTimeout, time.Millisecond,
				"the plugin waits on its stdin")
			conf, err := os.ReadFile(filepath.Join(dir, "conf"))
			require.NoError(t, err)
			require.Empty(t, conf, "nothing reached the plugin before the gate opened")

			gate.Release(tc.gate)
			err = testenv.RequireReturns(t, done)
			conf, rerr := os.ReadFile(filepath.Join(dir, "conf"))
			require.NoError(t, rerr)
			testenv.RequireGone(t, pid, "the plugin")
			tc.check(t, err, conf)
			assert.Equal(t, tc.gate == nil, GateOf(ctx) == nil, "only a gate that opened with no error holds nothing back")
		})
	}
}
