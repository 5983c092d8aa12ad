package calllog_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

func TestReadMissingFileIsEmpty(t *testing.T) {
	calls, err := calllog.Read(filepath.Join(t.TempDir(), "none.jsonl"))
	require.NoError(t, err)
	assert.Empty(t, calls)
}

func TestAppendReadFilter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	now := time.Now().UTC()
	for _, verb := range []string{"ADD", "DEL", "ADD"} {
		require.NoError(t, calllog.Append(path, calllog.Call{
			Verb:  verb,
			Stdin: map[string]any{"runtimeConfig": map[string]any{"k": "v"}},
			Time:  now,
		}))
	}
	calls, err := calllog.Read(path)
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.True(t, now.Equal(calls[0].Time))
	assert.Equal(t, map[string]any{"k": "v"}, calls[0].RuntimeConfig())
	assert.Nil(t, calls[0].PrevResult())
	assert.Len(t, calllog.Filter(calls, "ADD"), 2)
	assert.Empty(t, calllog.Filter(calls, "GC"))
}

func TestReadRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{\"verb\":\"ADD\"}\nnot json\n"), 0o644))
	_, err := calllog.Read(path)
	require.Error(t, err)
}
