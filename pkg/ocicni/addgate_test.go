package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// A setup whose attachments cannot be recorded runs no plugin, with an
// executor that cannot hold back stdin (it is called only once the gate
// is open), and fails saying so; with the record writable again the same
// sandbox sets up.
func TestSetupRunsNoPluginUnrecorded(t *testing.T) {
	root := t.TempDir()
	confDir, binDir, cacheDir := filepath.Join(root, "net.d"), filepath.Join(root, "bin"), filepath.Join(root, "cache")
	require.NoError(t, os.MkdirAll(confDir, 0o700))
	writeConf(t, confDir, "10-net.conflist", conflist("net", "1.0.0", "fake"))
	nsPath := filepath.Join(root, "ns")
	require.NoError(t, os.WriteFile(nsPath, nil, 0o600))
	fx := fakecni.New()
	fx.OnlyPlugins("fake")
	logger, _ := test.NewNullLogger()
	var mu sync.Mutex // guards hooked
	var hooked []PluginRun
	m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(cacheDir), WithoutWatcher(),
		WithExec(fx), WithNetNSOps(fx), WithLogger(logrus.NewEntry(logger)),
		WithPluginHook(func(_ context.Context, r PluginRun) {
			mu.Lock()
			defer mu.Unlock()
			if r.Verb != "VERSION" { // the load's
				hooked = append(hooked, r)
			}
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })

	// A file where the records' directory goes: nothing can be recorded.
	attachments := filepath.Join(cacheDir, "ocicni", "attachments")
	require.NoError(t, os.MkdirAll(filepath.Dir(attachments), 0o700))
	require.NoError(t, os.WriteFile(attachments, nil, 0o600))
	pod := PodNetwork{Name: "p", Namespace: "ns", ID: "pod1", NetNS: nsPath}
	_, err = m.SetUpPodWithContext(context.Background(), pod)
	require.ErrorContains(t, err, "recording its attachments before ADD")
	assert.Empty(t, fx.Calls("ADD", "DEL"), "no plugin ran")
	mu.Lock()
	assert.Empty(t, hooked, "no plugin run was reported")
	mu.Unlock()

	require.NoError(t, os.Remove(attachments))
	_, err = m.SetUpPodWithContext(context.Background(), pod)
	require.NoError(t, err)
	assert.Len(t, fx.Calls("ADD"), 1)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, hooked, 1)
	assert.Equal(t, "net", hooked[0].Network, "the network, from the context")
}
