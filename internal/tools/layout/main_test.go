package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture's measures: 3 files (not teardown_windows.go or tagged.go,
// which do not build on linux/amd64), Manager's 2 methods, one pair of files
// calling each other (teardown.go calls run in plan.go, which calls
// finish back in teardown.go; manager.go's label is called from plan.go
// only), and a teardown walk TearDown (manager.go), tearDown
// (teardown.go), run (plan.go), finish (teardown.go again: 1 return).
// Following the pod's ID too adds check (plan.go) and label (manager.go
// again), so 6 stops and 3 returns.
func TestRun(t *testing.T) {
	var buf bytes.Buffer
	out = &buf
	t.Cleanup(func() { out = nil })
	within = "pkg/"
	for _, tc := range []struct {
		name       string
		structured bool
		walk       string
	}{
		{"the pod and its plans", true, "walk: from Manager.TearDown, 4 stops in 3 files, 1 returns to a file it had left\n"},
		{"its ID too", false, "walk: from Manager.TearDown, 6 stops in 3 files, 3 returns to a file it had left\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			structured = tc.structured
			require.NoError(t, run("testdata/mod", config{pkg: "./pkg/engine", typeName: "Manager", from: "TearDown", verbose: true}))
			got := buf.String()
			assert.Contains(t, got, "files: 3 non-test files")
			assert.Contains(t, got, "methods: Manager has 2 methods in 1 files (manager.go 2)\n")
			assert.Contains(t, got, "pairs: 1 pairs of files call each other both ways: plan.go↔teardown.go\n")
			assert.Contains(t, got, tc.walk)
		})
	}
}
