package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// write stores one round's datapoints: create and stop+remove in ms per
// sandbox (stop is given the whole deletion, remove 0).
func write(t *testing.T, dir, rel string, createMs, deleteMs []int64) {
	t.Helper()
	d := map[string]any{"operationsNames": lifecycle, "numParallel": 1}
	var points []map[string]any
	for i := range createMs {
		points = append(points, map[string]any{"operationsDurationsNs": []int64{createMs[i] * 1e6, 1e6, deleteMs[i] * 1e6, 0}})
	}
	d["datapoints"] = points
	b, err := json.Marshal(d)
	require.NoError(t, err)
	f := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
	require.NoError(t, os.WriteFile(f, b, 0o600))
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	// Two rounds a side at 10 at once: the library's creations 10..19 and
	// 20..29 ms, stock's twice that; deletions the same on both sides.
	seq := func(from int64) []int64 {
		var v []int64
		for i := from; i < from+10; i++ {
			v = append(v, i)
		}
		return v
	}
	double := func(v []int64) []int64 {
		out := make([]int64, len(v))
		for i := range v {
			out[i] = 2 * v[i]
		}
		return out
	}
	write(t, dir, "crio/lib/r1/p10.json", seq(10), seq(100))
	write(t, dir, "crio/lib/r2/p10.json", seq(20), seq(100))
	write(t, dir, "crio/stock/r1/p10.json", double(seq(10)), seq(100))
	write(t, dir, "crio/stock/r2/p10.json", double(seq(20)), seq(100))
	write(t, dir, "containerd/lib/r1/p1.json", seq(5), seq(5))
	write(t, dir, "containerd/stock/r1/p1.json", seq(5), seq(5))

	r, err := load(dir)
	require.NoError(t, err)
	rows, err := compare(r)
	require.NoError(t, err)
	require.Len(t, rows, 2)

	assert.Equal(t, key{runtime: "containerd", parallel: 1}, rows[0].key)
	assert.Equal(t, key{runtime: "crio", parallel: 10}, rows[1].key)
	c := rows[1]
	assert.Equal(t, 20, c.lib.sandboxes)
	assert.Equal(t, 2, c.lib.rounds)
	// Pooled 10..29: nearest rank p50 is the 10th (19), p95 the 19th (28).
	assert.InDelta(t, 19.0, c.lib.createP50, 1e-9)
	assert.InDelta(t, 28.0, c.lib.createP95, 1e-9)
	assert.InDelta(t, 38.0, c.stock.createP50, 1e-9)
	assert.InDelta(t, 104.0, c.lib.deleteP50, 1e-9)
	assert.InDelta(t, 104.0, c.stock.deleteP50, 1e-9)
	assert.InDelta(t, 0.5, c.p50Spread[0], 1e-9)
	assert.InDelta(t, 0.5, c.p50Spread[1], 1e-9)

	var buf bytes.Buffer
	writeTable(&buf, rows)
	assert.Contains(t, buf.String(), "| crio | 10 | 20 / 20 (2) | **0.500** (19.0 / 38.0 ms) | **0.500** (28.0 / 56.0 ms) | **1.000** (104.0 / 104.0 ms) |")
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"empty", func(*testing.T, string) {}, "no <runtime>/<side>/<round>/p<n>.json"},
		{"one side", func(t *testing.T, dir string) {
			t.Helper()
			write(t, dir, "crio/lib/r1/p1.json", []int64{1}, []int64{1})
		}, `need both "lib" and "stock"`},
		{"corrupt", func(t *testing.T, dir string) {
			t.Helper()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "crio/lib/r1"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "crio/lib/r1/p1.json"), []byte("{"), 0o600))
		}, "p1.json"},
		{"bad parallelism", func(t *testing.T, dir string) {
			t.Helper()
			write(t, dir, "crio/lib/r1/px.json", []int64{1}, []int64{1})
		}, "is not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			r, err := load(dir)
			if err == nil {
				_, err = compare(r)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
