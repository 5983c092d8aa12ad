package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// cutShort leaves what a crash in the middle of a commit of pod's change
// leaves: the cache entry at entry moved aside, with the record the
// commit was writing (none: "[]") as its marker.
func (e *itEnv) cutShort(pod PodNetwork, entry string, content []byte) string {
	e.t.Helper()
	aside := filepath.Join(e.cacheDir, "ocicni", "aside", pod.ID)
	require.NoError(e.t, os.MkdirAll(aside, 0o700))
	require.NoError(e.t, os.WriteFile(filepath.Join(aside, ".next"), []byte("[]"), 0o600))
	require.NoError(e.t, os.WriteFile(filepath.Join(aside, filepath.Base(entry)), content, 0o600))
	require.NoError(e.t, os.Remove(entry))
	return aside
}

// podWithEntry sets up a bridge pod in a fresh env and returns its cache
// entry's path and content.
func podWithEntry(t *testing.T) (*itEnv, PodNetwork, string, []byte) {
	t.Helper()
	e := newITEnv(t)
	e.bridgeNet("net", "1.1.0")
	e.start()
	pod := e.pod("p")
	e.setUp(pod)
	entry := e.cachePath("net", pod, "eth0")
	content, err := os.ReadFile(entry)
	require.NoError(t, err)
	return e, pod, entry, content
}

// A teardown's commit that a crash cut short before the record was
// written is undone when the next manager starts, or when GC runs: the
// pod's cache entry is back, and the pod is then deleted with it. One cut
// short after the record was written is finished: its entry does not
// come back.
func TestCommitCutShortByACrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after func(e *itEnv, pod PodNetwork, entry string) // deletes the pod
	}{
		{"restart, then teardown", func(e *itEnv, pod PodNetwork, entry string) {
			e.restart()
			assert.FileExists(e.t, entry, "the start put the entry back")
			require.NoError(e.t, e.m.TearDownPodWithContext(e.ctx(), pod))
		}},
		{"GC", func(e *itEnv, pod PodNetwork, _ string) {
			require.NoError(e.t, e.m.GC(e.ctx(), nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, pod, entry, content := podWithEntry(t)
			aside := e.cutShort(pod, entry, content)
			require.NotEmpty(t, testenv.Reservations(t, e.dataDir, "net"))

			tc.after(e, pod, entry)
			assert.NoDirExists(t, aside)
			e.assertClean(pod, "net")
		})
	}

	t.Run("record written", func(t *testing.T) {
		t.Parallel()
		e, pod, entry, content := podWithEntry(t)
		require.NoError(t, e.m.TearDownPodWithContext(e.ctx(), pod))
		require.NoError(t, os.WriteFile(entry, content, 0o600)) // as it was before the teardown's commit
		aside := e.cutShort(pod, entry, content)

		e.restart()
		assert.NoDirExists(t, aside)
		assert.NoFileExists(t, entry, "the commit is finished: its entry stays gone")
		e.assertClean(pod, "net")
	})
}
