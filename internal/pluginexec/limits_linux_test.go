package pluginexec

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// TestCaptureIsBounded: a capture in memory takes no write past its cap
// plus one page, and holds no more memory than that.
func TestCaptureIsBounded(t *testing.T) {
	f, err := newCapture("stdout", MaxStdout)
	require.NoError(t, err)
	defer f.Close()
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	var werr error
	for i := 0; i < 2*MaxStdout/len(chunk) && werr == nil; i++ {
		_, werr = f.Write(chunk)
	}
	require.ErrorIs(t, werr, syscall.EPERM, "a write past the cap fails")
	assert.EqualValues(t, MaxStdout+os.Getpagesize(), written(f), "everything up to the cap plus one page was taken")
	var st syscall.Stat_t
	require.NoError(t, syscall.Fstat(int(f.Fd()), &st))
	assert.LessOrEqual(t, st.Blocks*512, int64(MaxStdout+os.Getpagesize()), "memory held by the capture")
	_, err = f.Seek(0, 0)
	require.NoError(t, err)
	require.Error(t, f.Truncate(0), "the size is sealed")
}

// TestExecOutputLimit: a plugin that prints past a stream's cap, forever
// or until it exits, is killed with its group, and its run fails with an
// *OutputLimitError naming the stream; the executor's process memory
// stays within a small constant of what it was (the capture holds at
// most the cap, and only the quoted head is read). A plugin that prints
// exactly the cap succeeds. Not parallel: the peak RSS is the process's.
func TestExecOutputLimit(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		stream string // "" for success
	}{
		{"stdout forever", `while :; do cat /dev/zero; done 2>/dev/null`, "stdout"},
		{"stderr forever", `while :; do cat /dev/zero >&2; done`, "stderr"},
		{"stdout past the cap, then exit", `head -c 67108864 /dev/zero`, "stdout"},
		{"stderr past the cap, then exit", `head -c 67108864 /dev/zero >&2; printf '{}'`, "stderr"},
		{"stdout at the cap", `head -c ` + strconv.Itoa(MaxStdout) + ` /dev/zero`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin := testenv.Script(t, `echo $$ > `+dir+`/p.tmp && mv `+dir+`/p.tmp `+dir+`/plugin.pid
`+tc.body)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runtimeGC()
			base := resetPeakRSS(t)
			var out Output
			stdout, err := New(nil).ExecPlugin(WithOutput(ctx, &out), plugin, nil, nil)
			peak := peakRSS(t)
			testenv.RequireGone(t, testenv.WaitPid(t, filepath.Join(dir, "plugin.pid")), "plugin")
			if tc.stream == "" {
				require.NoError(t, err)
				assert.Len(t, stdout, MaxStdout)
				return
			}
			require.NoError(t, ctx.Err(), "the plugin was killed for its output, not by the deadline")
			require.ErrorIs(t, err, ErrOutputLimit)
			var lerr *OutputLimitError
			require.ErrorAs(t, err, &lerr)
			assert.Equal(t, tc.stream, lerr.Stream)
			assert.Equal(t, plugin, lerr.Plugin)
			assert.LessOrEqual(t, len(lerr.Head), QuoteLimit)
			assert.LessOrEqual(t, len(err.Error()), 2*QuoteLimit, "the error quotes a bounded head")
			assert.Nil(t, stdout)
			assert.LessOrEqual(t, len(out.Stdout)+len(out.Stderr), 0, "no output of a failed run that overflowed")
			assert.Less(t, peak-base, int64(8<<20), "process memory grew by at most a small constant")
		})
	}
}

// TestExecQuotesBoundedOutput: the error of a failed plugin quotes at
// most QuoteLimit bytes of what it printed, however much that was;
// WithOutput gets all of it.
func TestExecQuotesBoundedOutput(t *testing.T) {
	const size = 1 << 20
	huge := `{"cniVersion":"1.0.0","code":7,"msg":"` + strings.Repeat("m", size) + `","details":"` + strings.Repeat("d", size) + `"}`
	hugeFile := filepath.Join(t.TempDir(), "error.json")
	require.NoError(t, os.WriteFile(hugeFile, []byte(huge), 0o644))
	cases := []struct {
		name       string
		body       string
		wantStdout int
		wantStderr int
	}{
		{"garbage on stdout", `head -c ` + strconv.Itoa(size) + ` /dev/urandom; exit 1`, size, 0},
		{"stderr only", `head -c ` + strconv.Itoa(size) + ` /dev/urandom >&2; exit 1`, 0, size},
		{"CNI error with a huge message", `cat ` + hugeFile + `; exit 1`, len(huge), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out Output
			_, err := New(nil).ExecPlugin(WithOutput(context.Background(), &out), testenv.Script(t, tc.body), nil, nil)
			var cniErr *types.Error
			require.ErrorAs(t, err, &cniErr)
			assert.LessOrEqual(t, len(cniErr.Msg), QuoteLimit+256, "message")
			assert.LessOrEqual(t, len(cniErr.Details), QuoteLimit+256, "details")
			assert.LessOrEqual(t, len(err.Error()), 2*QuoteLimit+256, "the whole error")
			assert.Contains(t, err.Error(), " more bytes)", "the cut is marked")
			assert.Len(t, out.Stdout, tc.wantStdout, "the whole stdout, on request")
			assert.Len(t, out.Stderr, tc.wantStderr, "the whole stderr, on request")
		})
	}
}

// resetPeakRSS resets the process's peak resident set size and returns
// the current one, in bytes.
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	return statusBytes(t, "VmRSS:")
}

// peakRSS returns the process's peak resident set size since the last
// reset, in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	return statusBytes(t, "VmHWM:")
}

func statusBytes(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	require.FailNow(t, "no "+field+" in /proc/self/status")
	return 0
}

// runtimeGC returns freed heap to the system, so that the peak measured
// next is the run's.
func runtimeGC() { debug.FreeOSMemory() }
