// Command critestbench compares critest's pod benchmark between the
// library and stock, from the datapoints that .ci/critest-bench collects:
//
//	<dir>/<runtime>/<side>/<round>/p<parallelism>.json
//
// where side is "lib" or "stock" and each file is critest's
// pod_benchmark_data.json. For each runtime and parallelism it pools every
// round's sandboxes of a side and prints, as a Markdown table, creation
// (RunPodSandbox) and deletion (StopPodSandbox, where the runtimes tear the
// network down, plus RemovePodSandbox) at p50 and p95 for both sides, with
// the library's ratios to stock, and the spread of the per-round p50
// ratios.
//
// It uses the standard library only, so it adds nothing to go.mod:
// go run ./internal/tools/critestbench <dir>.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: critestbench <dir>")
		os.Exit(2)
	}
	runs, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "critestbench:", err)
		os.Exit(1)
	}
	rows, err := compare(runs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "critestbench:", err)
		os.Exit(1)
	}
	writeTable(os.Stdout, rows)
}
