package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The operations of critest's PodSandbox lifecycle, in the order of each
// datapoint's durations.
var lifecycle = []string{"CreatePod", "StatusPod", "StopPod", "RemovePod"}

// dataset is critest's pod_benchmark_data.json.
type dataset struct {
	OperationsNames []string `json:"operationsNames"`
	NumParallel     int      `json:"numParallel"`
	Datapoints      []struct {
		OperationsDurationsNs []int64 `json:"operationsDurationsNs"`
	} `json:"datapoints"`
}

// key names one benchmark: a runtime at one parallelism.
type key struct {
	runtime  string
	parallel int
}

// sample is one sandbox's lifecycle, in milliseconds.
type sample struct {
	create, delete float64
}

// run is one round's sandboxes of one side.
type run struct {
	round   string
	samples []sample
}

// runs holds every round of both sides, by benchmark.
type runs map[key]map[string][]run

// load reads every <runtime>/<side>/<round>/p<n>.json under dir.
func load(dir string) (runs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*", "p*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no <runtime>/<side>/<round>/p<n>.json under %s", dir)
	}
	sort.Strings(files)
	out := runs{}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(parts[3], "p"), ".json"))
		if err != nil {
			return nil, fmt.Errorf("%s: parallelism %q is not a number", f, parts[3])
		}
		samples, err := read(f)
		if err != nil {
			return nil, err
		}
		k := key{runtime: parts[0], parallel: n}
		if out[k] == nil {
			out[k] = map[string][]run{}
		}
		out[k][parts[1]] = append(out[k][parts[1]], run{round: parts[2], samples: samples})
	}
	return out, nil
}

// read returns one file's sandboxes.
func read(file string) ([]sample, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d dataset
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if strings.Join(d.OperationsNames, ",") != strings.Join(lifecycle, ",") {
		return nil, fmt.Errorf("%s: operations %v, want %v", file, d.OperationsNames, lifecycle)
	}
	if len(d.Datapoints) == 0 {
		return nil, fmt.Errorf("%s: no datapoints", file)
	}
	out := make([]sample, 0, len(d.Datapoints))
	for i, p := range d.Datapoints {
		ns := p.OperationsDurationsNs
		if len(ns) != len(lifecycle) {
			return nil, fmt.Errorf("%s: datapoint %d has %d durations, want %d", file, i, len(ns), len(lifecycle))
		}
		out = append(out, sample{create: float64(ns[0]) / 1e6, delete: float64(ns[2]+ns[3]) / 1e6})
	}
	return out, nil
}
