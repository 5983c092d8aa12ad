package ocicni_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// BenchmarkSetupThenStatus is CRI-O's RunPodSandbox as the library sees
// it: a setup, then at once a status of the pod, paired between a
// manager that answers that status from the ADD's result (the default)
// and one with WithStatusAlwaysChecks, which runs CHECK, alternating
// which goes first. It reports the ratio of the two pairs' medians
// (setup and status, the default over CHECK) and each side's median.
func BenchmarkSetupThenStatus(b *testing.B) {
	e := newBenchEnv(b, 1)
	ctx := context.Background()
	sides := []struct {
		name string
		m    *ocicni.Manager
		ms   []float64
	}{
		{name: "from-add", m: newQuietManager(b, e.confDir, b.TempDir())},
		{name: "check", m: newQuietManager(b, e.confDir, b.TempDir(), ocicni.WithStatusAlwaysChecks())},
	}
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var took [2]float64
		for k := range sides {
			j := (k + i) % len(sides)
			s := &sides[j]
			ns := newBenchNetNS(b)
			pod := ocicni.PodNetwork{Name: "p", Namespace: "bench", ID: fmt.Sprintf("%s-%d", s.name, i), NetNS: ns}
			start := time.Now()
			_, err := s.m.SetUpPodWithContext(ctx, pod)
			require.NoError(b, err)
			_, err = s.m.GetPodNetworkStatusWithContext(ctx, pod)
			require.NoError(b, err)
			took[j] = testenv.Millis(time.Since(start))
			s.ms = append(s.ms, took[j])
			require.NoError(b, s.m.TearDownPodWithContext(ctx, pod))
			removeBenchNetNS(b, ns)
		}
		ratios = append(ratios, took[0]/took[1])
	}
	b.ReportMetric(testenv.Quantile(ratios, 0.5), "from-add-over-check-ratio")
	for _, s := range sides {
		b.ReportMetric(testenv.Quantile(s.ms, 0.5), s.name+"-ms")
	}
}
