//go:build unix

package pluginexec

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// BenchmarkPluginExec runs one plugin process (the loopback plugin, asked
// for its VERSION) through the raw executor of NewRaw, which the manager
// uses, and through libcni's invoke.RawExec, in alternating order, and
// reports each side's CPU time per run in the benchmark's process
// (starting the plugin, feeding its stdin, collecting its output, reaping
// it) and their ratio, ours over libcni's: lower is better. The plugins' own CPU is the same on both sides
// and not counted.
func BenchmarkPluginExec(b *testing.B) {
	require.NotEmpty(b, pluginDir, "plugins are built by TestMain")
	plugin := filepath.Join(pluginDir, "loopback")
	stdin := []byte(`{"cniVersion":"1.1.0","name":"bench","type":"loopback"}`)
	environ := append(os.Environ(), "CNI_COMMAND=VERSION")
	ctx := context.Background()
	sides := []Raw{NewRaw(nil), &invoke.RawExec{}}
	var cpu [2]testenv.CPUTime
	for i := 0; b.Loop(); i++ {
		for k := range sides {
			side := (i + k) % 2
			start := testenv.CPUNow(b)
			out, err := sides[side].ExecPlugin(ctx, plugin, stdin, environ)
			cpu[side] = cpu[side].Add(testenv.CPUNow(b).Sub(start))
			require.NoError(b, err)
			require.NotEmpty(b, out)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpu[0].Self.Microseconds())/n, "ocicni-cpu-µs/run")
	b.ReportMetric(float64(cpu[1].Self.Microseconds())/n, "libcni-cpu-µs/run")
	b.ReportMetric(float64(cpu[0].Self)/float64(cpu[1].Self), "cpu-ratio")
}
