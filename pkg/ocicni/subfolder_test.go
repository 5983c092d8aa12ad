package ocicni

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// A network's sub-folder gains a plugin after the manager started and
// long after the top-level file was written: the watcher reloads the
// network, ADD runs both plugins, and, once every file is gone, teardown
// from the cache runs DEL on both. Before, the sub-folder change was seen
// only by chance, and the cached config held only the inline plugins, so
// the sub-folder's plugins never got their DEL.
func TestSubFolderPluginsAddedLaterAreCachedAndDeleted(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.bridgeNet("neta", "1.0.0")
	top := filepath.Join(e.confDir, "10-neta.conflist")
	old := time.Now().Add(-time.Hour) // written long ago: its parse is trusted
	require.NoError(t, os.Chtimes(top, old, old))
	sub := filepath.Join(e.confDir, "neta")
	require.NoError(t, os.Mkdir(sub, 0o755)) // exists, empty, before the manager starts
	m := e.start(withWatcher)
	require.Equal(t, []string{"bridge"}, pluginTypes(m, "neta"))

	// Only the write inside the existing sub-folder tells of the change.
	testenv.WriteFile(t, sub, "50-rec.conf", e.recorder("neta", "1.0.0", nil))
	waitPluginTypes(t, m, "neta", "bridge", testenv.Recorder)

	pod := e.pod("p")
	e.setUp(pod)
	assert.Equal(t, []string{"neta"}, e.networksFor("ADD", pod.ID), "the sub-folder's plugin ran in the ADD")

	require.NoError(t, os.RemoveAll(sub))
	require.NoError(t, os.Remove(top))
	m = e.restart()
	require.Empty(t, m.Networks())
	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID}))
	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", pod.ID), "the cached config ran the sub-folder's plugin's DEL")
	e.assertClean(pod, "neta")
}
