package ocicni

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// These tests run shell scripts as plugins, through managedExec over the
// default executor; they need no root and no netns. The executor's own
// tests are in internal/pluginexec.

// A plugin that the default executor killed because its context ended
// fails with the context's error next to its own *types.Error.
func TestExecKilledPluginWrapsContextError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		cancel bool // end the context once the plugin runs (a deadline passes then)
		want   error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			ctx := testenv.NewExpiringContext()
			return ctx, ctx.Expire
		}, true, context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			plugin := testenv.Script(t, `echo $$ > `+dir+`/p.tmp && mv `+dir+`/p.tmp `+dir+`/plugin.pid
exec sleep 1000`)
			ctx, cancel := tc.ctx()
			defer cancel()
			done := testenv.ExecAsync(ctx, managedExec{inner: pluginexec.New(nil)}, plugin, nil, nil)
			pid := testenv.WaitPid(t, filepath.Join(dir, "plugin.pid"))
			if tc.cancel {
				cancel()
			}

			err := testenv.RequireReturns(t, done)
			require.ErrorIs(t, err, tc.want)
			var cniErr *types.Error
			require.ErrorAs(t, err, &cniErr, "the plugin's error is kept")
			testenv.RequireGone(t, pid, "plugin")
		})
	}
}

// execCounter counts ExecPlugin calls.
type execCounter struct {
	invoke.Exec
	calls int
}

func (c *execCounter) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	c.calls++
	return c.Exec.ExecPlugin(ctx, pluginPath, stdinData, environ)
}

// TestExecDoneContextStartsNoPlugin: with a context that is already done,
// the manager's executor calls no executor (whatever WithExec gave it),
// and returns the context's error.
func TestExecDoneContextStartsNoPlugin(t *testing.T) {
	for name, c := range testenv.DoneContexts(t) {
		t.Run(name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			plugin := testenv.Script(t, `touch `+marker)
			inner := &execCounter{Exec: pluginexec.New(&bytes.Buffer{})}

			_, err := managedExec{inner: inner}.ExecPlugin(c.Ctx, plugin, nil, nil)
			require.ErrorIs(t, err, c.Want)
			assert.Zero(t, inner.calls, "managedExec did not call the inner executor")
			assert.NoFileExists(t, marker, "the plugin never ran")
			var cniErr *types.Error
			require.NotErrorAs(t, err, &cniErr, "no plugin error: no plugin ran")
		})
	}
}

// The default executor starts the first ADD's plugin before the setup's
// gate opens (internal/pluginexec tests that it holds back its stdin);
// when the gate opens with an error, the run returns the gate's error and
// the hook hears of no run, since no plugin read a config.
func TestAddGateKilledPluginIsNoRun(t *testing.T) {
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
			plugin := testenv.Script(t, `echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"; exec cat > "$DIR/conf"`)
			var mu sync.Mutex
			runs := 0
			e := managedExec{
				inner: pluginexec.New(nil),
				hook:  func(context.Context, PluginRun) { mu.Lock(); runs++; mu.Unlock() },
			}
			gate := pluginexec.NewGate()
			ctx := pluginexec.WithGate(context.Background(), gate)
			done := testenv.ExecAsync(ctx, e, plugin, []byte(`{"name":"net"}`), []string{"DIR=" + dir, "CNI_COMMAND=ADD"})
			pid := testenv.WaitPid(t, filepath.Join(dir, "pid"))
			require.Eventually(t, func() bool {
				_, err := os.Stat(filepath.Join(dir, "conf"))
				return err == nil
			}, testenv.BarrierTimeout, time.Millisecond, "the plugin opened its output")

			gate.Release(tc.gate)
			err := testenv.RequireReturns(t, done)
			conf, rerr := os.ReadFile(filepath.Join(dir, "conf"))
			require.NoError(t, rerr)
			testenv.RequireGone(t, pid, "the plugin")
			mu.Lock()
			defer mu.Unlock()
			tc.check(t, err, conf, runs)
		})
	}
}
