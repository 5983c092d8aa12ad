package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// skippingConfDir makes a conf dir whose two files are skipped, a bad one
// and one whose plugin is missing from a new bin dir, and returns the
// flags for it with an empty cache dir. No network is loaded, so there is
// no default one.
func skippingConfDir(t *testing.T) []string {
	t.Helper()
	confDir := t.TempDir()
	testenv.WriteFile(t, confDir, "10-bad.conflist", `{"cniVersion": "1.0.0", "name": "bad", "plugins": [`)
	testenv.WriteFile(t, confDir, "20-nobin.conflist", `{"cniVersion": "1.0.0", "name": "nobin", "plugins": [{"type": "no-such-plugin"}]}`)
	return []string{"--conf-dir", confDir, "--bin-dir", t.TempDir(), "--cache-dir", t.TempDir()}
}

// TestStatusNoDefaultNetwork checks that status exits with the code its
// help gives for a conf dir without a default network: 2, not found, as
// the exit code table has it for every command.
func TestStatusNoDefaultNetwork(t *testing.T) {
	help := strings.Join(strings.Fields(mustRun(t, exitOK, "help", "status").stdout), " ")
	m := regexp.MustCompile(`Exits (\d) \(not found\) when no default network is loaded`).FindStringSubmatch(help)
	require.NotNil(t, m, "status's help gives no exit code for no default network:\n%s", help)
	documented, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Equal(t, exitNotFound, documented)
	assert.Contains(t, exitCodesHelp, "2  not found: no such network (or no default network)")

	for _, tc := range []struct {
		name string
		dirs []string
	}{
		{name: "empty conf dir", dirs: []string{"--conf-dir", t.TempDir(), "--bin-dir", t.TempDir(), "--cache-dir", t.TempDir()}},
		{name: "every file skipped", dirs: skippingConfDir(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRun(t, documented, append([]string{"status"}, tc.dirs...)...)
			assert.Contains(t, r.stderr, "no default network")

			doc := decode[nodeStatusJSON](t, mustRun(t, documented, append([]string{"status", "--json"}, tc.dirs...)...))
			assert.Empty(t, doc.Default)
			assert.False(t, doc.Ready)
			require.NotNil(t, doc.Error)
			assert.Contains(t, doc.Error.Message, "no default network")
		})
	}
}

// TestSkippedReasonsPrintedOnce checks that the commands that list the
// skipped config files print each file's reason once, in the list: not
// again in the library's log, nor in the "no default network" error.
func TestSkippedReasonsPrintedOnce(t *testing.T) {
	reasons := []string{
		"unexpected end of JSON input", // 10-bad.conflist
		"failed to find plugin",        // 20-nobin.conflist
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "status", args: []string{"status"}},
		{name: "status --json", args: []string{"status", "--json"}},
		{name: "stats --conf", args: []string{"stats", "--conf"}},
		{name: "stats --conf --json", args: []string{"stats", "--conf", "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dirs := skippingConfDir(t)
			r := mustRun(t, exitNotFound, append(tc.args, dirs...)...)
			for _, reason := range reasons {
				assert.Equal(t, 1, strings.Count(r.stdout+r.stderr, reason), "%q\n%s", reason, r)
			}
			assert.Contains(t, r.stderr, "no valid CNI configuration in "+dirs[1]+" (2 config files skipped, listed with the reason)")
			for _, file := range []string{"10-bad.conflist", "20-nobin.conflist"} {
				assert.Contains(t, r.stdout, filepath.Join(dirs[1], file))
			}
		})
	}
}

// The node's faults that the library works around are listed under
// their own heading, each with what the library does instead; a node
// without any lists none, and prints no heading.
func TestStatusListsNodeFaults(t *testing.T) {
	t.Parallel()
	doc := nodeStatusJSON{Networks: []networkStatusJSON{{Network: "n", Default: true, Ready: true}}, Faults: []faultJSON{}}
	render := func(doc nodeStatusJSON) string {
		var b strings.Builder
		require.NoError(t, (&printer{w: &b}).emit(doc, func(tb *table) { nodeStatusTable(tb, doc) }))
		return b.String()
	}
	assert.NotContains(t, render(doc), "NODE FAULTS")
	doc.Faults = append(doc.Faults, faultJSON{Part: "watcher", Effect: "polls", Error: "too many open files"})
	out := render(doc)
	assert.Contains(t, out, "NODE FAULTS WORKED AROUND")
	assert.Regexp(t, `watcher\s+polls\s+too many open files`, out)

	r := mustRun(t, exitNotFound, "status", "--json", "--conf-dir", t.TempDir(), "--bin-dir", t.TempDir(),
		"--cache-dir", t.TempDir())
	assert.Contains(t, r.stdout, `"faults": [`, "always listed, empty or not")
}
