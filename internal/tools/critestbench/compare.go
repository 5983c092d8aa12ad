package main

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// The sides compared: the library's over stock's.
const (
	lib   = "lib"
	stock = "stock"
)

// figures are one side's percentiles, in milliseconds.
type figures struct {
	sandboxes, rounds    int
	createP50, createP95 float64
	deleteP50, deleteP95 float64
}

// row is one benchmark's comparison.
type row struct {
	key
	lib, stock figures
	// p50Spread is the lowest and highest of the rounds' creation p50
	// ratios, the rounds paired in order.
	p50Spread [2]float64
}

// compare pairs the sides of every benchmark; both must be there.
func compare(r runs) ([]row, error) {
	keys := make([]key, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].runtime != keys[j].runtime {
			return keys[i].runtime < keys[j].runtime
		}
		return keys[i].parallel < keys[j].parallel
	})
	rows := make([]row, 0, len(keys))
	for _, k := range keys {
		l, s := r[k][lib], r[k][stock]
		if len(l) == 0 || len(s) == 0 {
			return nil, fmt.Errorf("%s at %d: need both %q and %q runs (have %d and %d)", k.runtime, k.parallel, lib, stock, len(l), len(s))
		}
		rw := row{key: k, lib: summarize(l), stock: summarize(s), p50Spread: [2]float64{math.Inf(1), math.Inf(-1)}}
		for i := 0; i < len(l) && i < len(s); i++ {
			q := percentile(creates(l[i].samples), 50) / percentile(creates(s[i].samples), 50)
			rw.p50Spread[0] = math.Min(rw.p50Spread[0], q)
			rw.p50Spread[1] = math.Max(rw.p50Spread[1], q)
		}
		rows = append(rows, rw)
	}
	return rows, nil
}

// summarize pools a side's rounds.
func summarize(rs []run) figures {
	var c, d []float64
	for _, r := range rs {
		c = append(c, creates(r.samples)...)
		for _, s := range r.samples {
			d = append(d, s.delete)
		}
	}
	return figures{
		sandboxes: len(c), rounds: len(rs),
		createP50: percentile(c, 50), createP95: percentile(c, 95),
		deleteP50: percentile(d, 50), deleteP95: percentile(d, 95),
	}
}

func creates(s []sample) []float64 {
	out := make([]float64, len(s))
	for i := range s {
		out[i] = s[i].create
	}
	return out
}

// percentile is the nearest-rank percentile p of v.
func percentile(v []float64, p float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// writeTable prints the rows as a Markdown table: milliseconds, library
// against stock, and the ratio.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| Runtime | At once | Sandboxes (rounds) | Create p50 | Create p95 | Delete p50 | Delete p95 | Create p50, rounds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d / %d (%d) | %s | %s | %s | %s | %.3f–%.3f |\n",
			r.runtime, r.parallel, r.lib.sandboxes, r.stock.sandboxes, r.lib.rounds,
			cell(r.lib.createP50, r.stock.createP50), cell(r.lib.createP95, r.stock.createP95),
			cell(r.lib.deleteP50, r.stock.deleteP50), cell(r.lib.deleteP95, r.stock.deleteP95),
			r.p50Spread[0], r.p50Spread[1])
	}
}

// cell is "ratio (lib / stock ms)".
func cell(l, s float64) string {
	return fmt.Sprintf("**%.3f** (%.1f / %.1f ms)", l/s, l, s)
}
