package pluginexec

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A plugin run under WithLowPriority starts at SCHED_IDLE and nice
// LowNice; one run without keeps the caller's priority. The plugin reads
// its own /proc/<pid>/stat, whatever its verb.
func TestWithLowPriority(t *testing.T) {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	require.NoError(t, err)
	own := 20 - prio // Linux's getpriority returns 20 minus the nice value
	if own >= LowNice {
		t.Skip("the test process already runs at the lowest nice value")
	}
	plugin := testenv.Script(t, `cat /proc/$$/stat`)
	for _, tc := range []struct {
		name       string
		low        bool
		wantNice   int
		wantPolicy int
	}{
		{"normal", false, own, unix.SCHED_NORMAL},
		{"low", true, LowNice, unix.SCHED_IDLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.low {
				ctx = WithLowPriority(ctx)
			}
			out, err := New(nil).ExecPlugin(ctx, plugin, nil, nil)
			require.NoError(t, err)
			nice, policy := statPriority(t, string(out))
			assert.Equal(t, tc.wantNice, nice, "nice")
			assert.Equal(t, tc.wantPolicy, policy, "scheduling policy")
		})
	}
}

// statPriority returns the nice value and the scheduling policy from the
// text of a /proc/<pid>/stat file (fields 19 and 41, see proc(5)).
func statPriority(t *testing.T, stat string) (nice, policy int) {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	require.Positive(t, i, "a stat line: %q", stat)
	f := strings.Fields(stat[i+1:]) // from field 3 on
	require.Greater(t, len(f), 41-3, "a stat line: %q", stat)
	nice, err := strconv.Atoi(f[19-3])
	require.NoError(t, err)
	policy, err = strconv.Atoi(f[41-3])
	require.NoError(t, err)
	return nice, policy
}
