package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// loudPlugin writes, into a bin dir of its own, a plugin "loud" that
// answers VERSION and succeeds at every verb but ADD, where it runs add.
func loudPlugin(t *testing.T, add string) string {
	t.Helper()
	dir := t.TempDir()
	body := `case "$CNI_COMMAND" in
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
ADD) cat >/dev/null; ` + add + ` ;;
esac`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "loud"), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return dir
}

// A chained plugin that prints without end, or prints a megabyte of
// garbage and fails, fails the setup with an error that quotes a bounded
// part of its output (typed, for the first); the rollback releases the
// bridge's address and interface, and the plugin hook gets all the output
// there is.
func TestSetupWithLoudPlugin(t *testing.T) {
	t.Parallel()
	const garbage = 1 << 20
	cases := []struct {
		name     string
		add      string
		overflow bool
	}{
		{"prints forever", `while :; do cat /dev/zero; done 2>/dev/null`, true},
		{"prints garbage and fails", `head -c 1048576 /dev/urandom; exit 1`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.bridgeNet("net", "1.0.0", `{"type":"loud"}`)
			var got healRuns
			m := e.start(WithBinDirs(pluginDir, loudPlugin(t, tc.add)), WithPluginHook(got.hook))
			pod := e.pod("p")

			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.Error(t, err)
			assert.LessOrEqual(t, len(err.Error()), 2*PluginOutputQuoteLimit, "the error quotes a bounded part: %.300s", err)
			adds := got.of("ADD", "loud")
			require.Len(t, adds, 1)
			if tc.overflow {
				require.ErrorIs(t, err, ErrPluginOutputLimit)
				var lerr *PluginOutputLimitError
				require.ErrorAs(t, err, &lerr)
				assert.Equal(t, "stdout", lerr.Stream)
				assert.EqualValues(t, MaxPluginStdout, lerr.Limit)
				require.ErrorIs(t, adds[0].Err, ErrPluginOutputLimit)
			} else {
				requirePluginError(t, err, "net", "ADD", 0)
				assert.Contains(t, err.Error(), " more bytes)", "the quote is marked as cut")
				assert.Len(t, adds[0].Stdout, garbage, "the hook gets all the plugin printed")
			}
			assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"))
			e.assertClean(pod, "net")
		})
	}
}

// of returns the runs of verb by plugin.
func (r *healRuns) of(verb, plugin string) []PluginRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []PluginRun
	for _, x := range r.list {
		if x.Verb == verb && x.Plugin == plugin {
			out = append(out, x)
		}
	}
	return out
}
