package ocicni

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// The default executor starts the first ADD's plugin before the setup's
// gate opens, but the plugin reads nothing from stdin until it does; when
// the gate opens with an error, the plugin is killed without having read
// its config, the run returns the gate's error, and the hook hears of no
// run. Deterministic: the plugin is seen blocked reading an empty stdin
// before the gate opens.
func TestAddGateHoldsBackStdin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gate  error
		check func(t *testing.T, err error, conf []byte, runs int)
	}{
		{"opens", nil, func(t *testing.T, err error, conf []byte, runs int) {
			t.Helper()
			require.NoError(t, err)
			assert.JSONEq(t, `{"name":"net"}`, string(conf), "the config, once the gate opened")
			assert.Equal(t, 1, runs)
		}},
		{"fails", errors.New("recording failed"), func(t *testing.T, err error, conf []byte, runs int) {
			t.Helper()
			require.EqualError(t, err, "recording failed")
			assert.Empty(t, conf, "the plugin never read its config")
			assert.Zero(t, runs, "a plugin killed before its config is not a run")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin := script(t, `echo $$ > "$DIR/pid"; exec cat > "$DIR/conf"`)
			var mu sync.Mutex
			runs := 0
			e := managedExec{
				inner: &defaultExec{rawExec: newRawExec(nil)},
				hook:  func(context.Context, PluginRun) { mu.Lock(); runs++; mu.Unlock() },
			}
			gate := newAddGate()
			ctx := withAddGate(context.Background(), gate)
			done := make(chan error, 1)
			go func() {
				_, err := e.ExecPlugin(ctx, plugin, []byte(`{"name":"net"}`), []string{"DIR=" + dir, "CNI_COMMAND=ADD"})
				done <- err
			}()
			pid := waitPid(t, filepath.Join(dir, "pid"))
			require.Eventually(t, func() bool { return blockedOnStdin(t, pid) }, 10*time.Second, time.Millisecond,
				"the plugin waits on its stdin")
			conf, err := os.ReadFile(filepath.Join(dir, "conf"))
			require.NoError(t, err)
			require.Empty(t, conf, "nothing reached the plugin before the gate opened")

			gate.release(tc.gate)
			err = requireReturns(t, done)
			conf, rerr := os.ReadFile(filepath.Join(dir, "conf"))
			require.NoError(t, rerr)
			requireGone(t, pid, "the plugin")
			mu.Lock()
			defer mu.Unlock()
			tc.check(t, err, conf, runs)
		})
	}
}
