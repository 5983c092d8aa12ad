package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment variables the library's tests read too.
const (
	// pluginDirEnv names a directory of prebuilt reference plugins ("make
	// plugins" fills bin/plugins); without it, run builds them.
	pluginDirEnv = "OCICNI_TEST_PLUGIN_DIR"
	// requireRootEnv, when set, makes a root-only test fail instead of
	// skipping (CI sets it when it runs as root).
	requireRootEnv = "OCICNI_TEST_REQUIRE_ROOT"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(requireRootEnv) != "" {
		t.Fatalf("needs root, and $%s says this run must not skip it", requireRootEnv)
	}
	t.Skip("needs root: it attaches a real network namespace")
}

// TestRun runs the example and checks what its scrape says about the one
// setup, teardown and GC it did, and that it left nothing behind.
func TestRun(t *testing.T) {
	requireRoot(t)

	// The bridge the example's network uses. It must not exist yet: the
	// test deletes it afterwards, and deletes only what it made.
	b, err := writeConflist(filepath.Join(t.TempDir(), "net.d"), t.TempDir())
	require.NoError(t, err)
	exists, err := linkExists(b.Bridge)
	require.NoError(t, err)
	require.False(t, exists, "bridge %s exists already: is another copy of the example running?", b.Bridge)
	nsBefore := exampleNetNSes(t)
	// run removes all of these itself (checked below); these cleanups only
	// keep a failed run from leaking them into later tests.
	t.Cleanup(func() {
		assert.NoError(t, deleteLink(b.Bridge))
		for _, ns := range exampleNetNSes(t) {
			if !slices.Contains(nsBefore, ns) {
				assert.NoError(t, removeNetNS(ns))
			}
		}
	})
	// run's temporary directories go here, to check that it removes them.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	scrape, err := run(ctx, config{binDir: os.Getenv(pluginDirEnv)}, &out)
	t.Logf("run's output:\n%s", &out)
	require.NoError(t, err)

	t.Run("cleanup", func(t *testing.T) {
		exists, err := linkExists(b.Bridge)
		require.NoError(t, err)
		assert.False(t, exists, "bridge %s left behind", b.Bridge)
		assert.ElementsMatch(t, nsBefore, exampleNetNSes(t), "netns left behind")
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, left, "files left behind in $TMPDIR")
	})

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(scrape))
	require.NoError(t, err)
	family := func(t *testing.T, name string, typ dto.MetricType) *dto.MetricFamily {
		t.Helper()
		f := families[name]
		require.NotNil(t, f, "no family %s in the scrape", name)
		require.Equal(t, typ, f.GetType(), "type of %s", name)
		return f
	}

	t.Run("operation duration", func(t *testing.T) {
		f := family(t, "cni_operation_duration_seconds", dto.MetricType_HISTOGRAM)
		for _, op := range []string{"setup", "teardown", "gc"} {
			ms := withLabels(f, map[string]string{"cni_operation": op})
			if assert.Len(t, ms, 1, "series of operation %s", op) {
				assert.Equal(t, "ok", label(ms[0], "cni_outcome"), "outcome of %s", op)
				assert.Equal(t, uint64(1), ms[0].GetHistogram().GetSampleCount(), "%s count", op)
			}
		}
	})

	t.Run("plugin duration", func(t *testing.T) {
		f := family(t, "cni_plugin_duration_seconds", dto.MetricType_HISTOGRAM)
		for verb, reason := range map[string]string{"ADD": "setup", "DEL": "teardown", "GC": "gc"} {
			ms := withLabels(f, map[string]string{
				"cni_verb": verb, "cni_plugin_type": "bridge", "cni_network": b.Name,
				"cni_reason": reason, "cni_outcome": "ok",
			})
			if assert.Len(t, ms, 1, "series of the bridge's %s", verb) {
				assert.Equal(t, uint64(1), ms[0].GetHistogram().GetSampleCount(), "bridge %s count", verb)
			}
		}
	})

	t.Run("GC runs", func(t *testing.T) {
		f := family(t, "cni_gc_runs_total", dto.MetricType_COUNTER)
		ms := withLabels(f, map[string]string{"cni_outcome": "ok"})
		require.Len(t, ms, 1)
		assert.InDelta(t, 1.0, ms[0].GetCounter().GetValue(), 0)
		assert.InDelta(t, 1.0, sum(f), 0, "GC runs of any outcome")
	})

	t.Run("pending teardowns", func(t *testing.T) {
		f := family(t, "cni_teardown_pending", dto.MetricType_GAUGE)
		require.Len(t, f.GetMetric(), 1)
		assert.Zero(t, f.GetMetric()[0].GetGauge().GetValue())
		age := family(t, "cni_teardown_pending_age_seconds", dto.MetricType_GAUGE)
		require.Len(t, age.GetMetric(), 1)
		assert.Zero(t, age.GetMetric()[0].GetGauge().GetValue())
	})

	t.Run("config reloads", func(t *testing.T) {
		f := family(t, "cni_config_reloads_total", dto.MetricType_COUNTER)
		assert.GreaterOrEqual(t, sum(f), 1.0)
	})

	t.Run("no per-container labels", func(t *testing.T) {
		var cni int
		for name, f := range families {
			if !strings.HasPrefix(name, "cni_") {
				continue
			}
			cni++
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					assert.NotContains(t, []string{"cni_container_id", "cni_ifname"}, l.GetName(),
						"%s has a per-container label", name)
				}
			}
		}
		assert.Positive(t, cni, "no cni_* families")
	})

	t.Run("printed", func(t *testing.T) {
		assert.Contains(t, out.String(), `cni_gc_runs_total{`)
		assert.NotContains(t, string(cniFamilies(scrape)), "target_info")
	})
}

// withLabels returns the metrics of f that carry every label in want.
func withLabels(f *dto.MetricFamily, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			ok = ok && label(m, k) == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// label returns the value of m's label name, "" without one.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sum adds up the values of a counter family's series.
func sum(f *dto.MetricFamily) float64 {
	var s float64
	for _, m := range f.GetMetric() {
		s += m.GetCounter().GetValue()
	}
	return s
}

// exampleNetNSes lists the namespaces pinned under netnsDir with the
// example's prefix.
func exampleNetNSes(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ocicni-metrics-") {
			out = append(out, filepath.Join(netnsDir, e.Name()))
		}
	}
	return out
}
