package pluginexec

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// These tests run shell scripts as plugins; they need no root and no netns.

// execTo is the executor of New, typed as libcni uses it, with plugin
// stderr going to stderr.
func execTo(stderr *bytes.Buffer) invoke.Exec { return New(stderr) }

// TestExecMatchesRawExec runs each plugin through invoke.RawExec and
// through the executor of New and expects the same output, the same
// error and the same stderr passthrough.
func TestExecMatchesRawExec(t *testing.T) {
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	}))
	cases := []struct {
		name     string
		ctx      context.Context
		body     string
		wantOut  string
		wantCode uint   // the *types.Error's code, when wantMsg is set
		wantMsg  string // the *types.Error's message; empty for success
		wantErr  string // stderr passed through
	}{
		{
			name: "stdin, environment and stderr", ctx: context.Background(),
			body:    `cat; printf '%s\n' "$CNI_COMMAND" "$FOO" >&2`,
			wantOut: `{"cniVersion":"1.0.0"}`, wantErr: "ADD\nbar\n",
		},
		{
			name: "trace context", ctx: traced,
			body:    `printf '%s' "$TRACEPARENT"`,
			wantOut: "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01",
		},
		{
			name: "CNI error on stdout", ctx: context.Background(),
			body:     `printf '{"cniVersion":"1.0.0","code":11,"msg":"try later","details":"busy"}'; echo ignored >&2; exit 1`,
			wantCode: 11, wantMsg: "try later",
		},
		{
			name: "stderr only", ctx: context.Background(),
			body:    `echo boom >&2; exit 3`,
			wantMsg: `netplugin failed: "boom\n": exit status 3`,
		},
		{
			name: "no output", ctx: context.Background(),
			body:    `exit 4`,
			wantMsg: "netplugin failed with no error message: exit status 4",
		},
		{
			name: "garbage on stdout", ctx: context.Background(),
			body:    `echo garbage; exit 1`,
			wantMsg: `netplugin failed but error parsing its diagnostic message "garbage\n": invalid character 'g' looking for beginning of value`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plugin := testenv.Script(t, tc.body)
			stdin := []byte(`{"cniVersion":"1.0.0"}`)
			env := []string{"CNI_COMMAND=ADD", "FOO=bar"}

			var refStderr, ourStderr bytes.Buffer
			refOut, refErr := (&invoke.RawExec{Stderr: &refStderr}).ExecPlugin(tc.ctx, plugin, stdin, env)
			out, err := execTo(&ourStderr).ExecPlugin(tc.ctx, plugin, stdin, env)

			assert.Equal(t, refOut, out, "stdout as invoke.RawExec")
			assert.Equal(t, refErr, err, "error as invoke.RawExec")
			assert.Equal(t, refStderr.String(), ourStderr.String(), "stderr as invoke.RawExec")
			assert.Equal(t, tc.wantErr, ourStderr.String())
			if tc.wantMsg == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.wantOut, string(out))
				return
			}
			var cniErr *types.Error
			require.ErrorAs(t, err, &cniErr)
			assert.Equal(t, tc.wantCode, cniErr.Code)
			assert.Equal(t, tc.wantMsg, cniErr.Msg)
		})
	}
}

// TestExecKillsProcessGroupWhenContextEnds: a plugin that started a child
// holding its stdout is killed together with the child, and ExecPlugin
// returns the plugin's *types.Error (wrapping the context's error is the
// caller's: see pkg/ocicni's managedExec).
func TestExecKillsProcessGroupWhenContextEnds(t *testing.T) {
	t.Parallel()
	// The context ends once the pids are known: a deadline set to a time
	// could pass before the plugin wrote them on a loaded machine.
	cases := []struct {
		name string
		ctx  func() (ctx context.Context, end func())
	}{
		{"cancelled", func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancel
		}},
		{"deadline", func() (context.Context, func()) {
			ctx := testenv.NewExpiringContext()
			return ctx, ctx.Expire
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			plugin := testenv.Script(t, `echo $$ > `+dir+`/p.tmp && mv `+dir+`/p.tmp `+dir+`/plugin.pid
sleep 1000 &
echo $! > `+dir+`/c.tmp && mv `+dir+`/c.tmp `+dir+`/child.pid
wait`)
			ctx, end := tc.ctx()
			defer end()
			done := testenv.ExecAsync(ctx, execTo(&bytes.Buffer{}), plugin, nil, nil)
			pluginPid := testenv.WaitPid(t, filepath.Join(dir, "plugin.pid"))
			childPid := testenv.WaitPid(t, filepath.Join(dir, "child.pid"))
			end()

			err := testenv.RequireReturns(t, done)
			var cniErr *types.Error
			require.ErrorAs(t, err, &cniErr, "the plugin's error")
			testenv.RequireGone(t, pluginPid, "plugin")
			testenv.RequireGone(t, childPid, "plugin's child")
		})
	}
}

// TestExecWaitDelay: a process that left the plugin's group and
// holds its stdout open neither blocks ExecPlugin nor is killed.
func TestExecWaitDelay(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid")
	}
	cases := []struct {
		name    string
		tail    string // what the plugin does after starting the escaped child
		cancel  bool
		wantOut string
		wantErr bool // the plugin's *types.Error, as it was killed
	}{
		{"plugin exits 0: its output stands", `printf '{"cniVersion":"1.0.0"}'`, false, `{"cniVersion":"1.0.0"}`, false},
		{"plugin killed", `wait`, true, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The child writes its own pid once setsid has taken it out of
			// the plugin's group: a pid written by the plugin ($!) could be
			// read, and the group killed, before the child left it.
			plugin := testenv.Script(t, `setsid sh -c 'echo $$ > `+dir+`/c.tmp && mv `+dir+`/c.tmp `+dir+`/child.pid && exec sleep 1000' &
`+tc.tail)
			e := &Exec{Raw: &groupExec{waitDelay: 100 * time.Millisecond}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := e.ExecPlugin(ctx, plugin, nil, nil)
				done <- result{out, err}
			}()
			child := testenv.WaitPid(t, filepath.Join(dir, "child.pid"))
			if tc.cancel {
				cancel()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				require.FailNow(t, "ExecPlugin waited for the escaped child")
			}
			if tc.wantErr {
				var cniErr *types.Error
				require.ErrorAs(t, r.err, &cniErr)
			} else {
				require.NoError(t, r.err)
			}
			assert.Equal(t, tc.wantOut, string(r.out))
			assert.False(t, testenv.ProcessGone(t, child), "a process outside the group is not killed")
		})
	}
}

// TestExecNormalExitKillsNothing: after a plugin exits on its own,
// the processes it left in its group keep running.
func TestExecNormalExitKillsNothing(t *testing.T) {
	dir := t.TempDir()
	plugin := testenv.Script(t, `sleep 1000 >/dev/null 2>&1 &
echo $! > `+dir+`/child.pid
printf '{"cniVersion":"1.0.0"}'`)
	ctx, cancel := context.WithCancel(context.Background())
	out, err := execTo(&bytes.Buffer{}).ExecPlugin(ctx, plugin, nil, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"cniVersion":"1.0.0"}`, string(out))
	child := testenv.WaitPid(t, filepath.Join(dir, "child.pid"))
	cancel() // a context that ends after the plugin exited kills nothing either
	assert.False(t, testenv.ProcessGone(t, child), "the plugin's child still runs")
}

// TestExecDoneContextStartsNoPlugin: with a context that is already done,
// the executor starts no plugin and returns the context's error.
func TestExecDoneContextStartsNoPlugin(t *testing.T) {
	for name, c := range testenv.DoneContexts(t) {
		t.Run(name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			plugin := testenv.Script(t, `touch `+marker)
			_, err := execTo(&bytes.Buffer{}).ExecPlugin(c.Ctx, plugin, nil, nil)
			require.ErrorIs(t, err, c.Want, "the executor returns the context's error")
			assert.NoFileExists(t, marker, "the plugin never ran")
			var cniErr *types.Error
			require.NotErrorAs(t, err, &cniErr, "no plugin error: no plugin ran")
		})
	}
}

// TestExecStdinAndOutput: the plugin gets its whole stdin, whatever
// its size (written at once up to a page, by a goroutine beyond), and
// ExecPlugin returns everything it printed; a plugin that exits without
// reading its stdin neither fails nor holds the run.
func TestExecStdinAndOutput(t *testing.T) {
	cat := testenv.Script(t, `exec cat`)
	const ignoredOut = `{"cniVersion":"1.0.0"}`
	ignore := testenv.Script(t, `printf '`+ignoredOut+`'; printf 'note' >&2`)
	cases := []struct {
		name       string
		plugin     string
		size       int
		echoes     bool   // the plugin prints its stdin back, else ignoredOut
		wantStderr string // what reaches the executor's stderr
	}{
		{"empty", cat, 0, true, ""},
		{"small", cat, 100, true, ""},
		{"one page", cat, stdinInline, true, ""},
		{"just over a page", cat, stdinInline + 1, true, ""},
		{"larger than a pipe", cat, 1 << 20, true, ""},
		{"unread, small", ignore, 100, false, "note"},
		{"unread, larger than a pipe", ignore, 1 << 20, false, "note"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdin := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			want := ignoredOut
			if tc.echoes {
				want = string(stdin)
			}
			var stderr bytes.Buffer
			out, err := execTo(&stderr).ExecPlugin(context.Background(), tc.plugin, stdin, nil)
			require.NoError(t, err)
			require.Equal(t, want, string(out))
			assert.Equal(t, tc.wantStderr, stderr.String(), "stderr is passed through")
		})
	}
}
