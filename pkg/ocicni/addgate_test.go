package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A setup whose attachments cannot be recorded runs no plugin, with an
// executor that cannot hold back stdin (it is called only once the gate
// is open), and fails saying so; with the record writable again the same
// sandbox sets up.
func TestSetupRunsNoPluginUnrecorded(t *testing.T) {
	env := newFakeEnv(t)
	var mu sync.Mutex // guards hooked
	var hooked []PluginRun
	m, fx := env.manager(t, WithPluginHook(func(_ context.Context, r PluginRun) {
		mu.Lock()
		defer mu.Unlock()
		if r.Verb != "VERSION" { // the load's
			hooked = append(hooked, r)
		}
	}))
	cacheDir, nsPath := env.cacheDir, env.nsPath

	// A file where the records' directory goes: nothing can be recorded.
	attachments := filepath.Join(cacheDir, "ocicni", "attachments")
	require.NoError(t, os.MkdirAll(filepath.Dir(attachments), 0o700))
	require.NoError(t, os.WriteFile(attachments, nil, 0o600))
	pod := PodNetwork{Name: "p", Namespace: "ns", ID: "pod1", NetNS: nsPath}
	_, err := m.SetUpPodWithContext(context.Background(), pod)
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
