package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WriteDurableLinked leaves name and link holding the data, one file
// (two links), and no temporary file; a link that exists is kept as it
// is, and the write still takes place.
func TestWriteDurableLinked(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	linked, err := NewRoot(dir).WriteDurableLinked(dir, "name", ".tmp-*", []byte("one"), link)
	require.NoError(t, err)
	assert.True(t, linked)
	for _, p := range []string{filepath.Join(dir, "name"), link} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "one", string(b), p)
	}
	fi, err := os.Stat(link)
	require.NoError(t, err)
	if n, _, ok := Links(fi); ok { // Linux
		assert.Equal(t, uint64(2), n, "name and link are one file")
	}

	linked, err = NewRoot(dir).WriteDurableLinked(dir, "name", ".tmp-*", []byte("two"), link)
	require.NoError(t, err)
	assert.False(t, linked, "the link existed")
	b, err := os.ReadFile(link)
	require.NoError(t, err)
	assert.Equal(t, "one", string(b), "the existing link is kept")
	b, err = os.ReadFile(filepath.Join(dir, "name"))
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, des, 2, "no temporary file is left")
}

// A durable write that fails before its file takes its name leaves
// nothing it made: neither the temporary file nor the link; a link that
// existed stays.
func TestWriteDurableLinkedFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		linkExists bool
	}{
		{name: "new link"},
		{name: "existing link", linkExists: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			link := filepath.Join(dir, "link")
			if tc.linkExists {
				require.NoError(t, os.WriteFile(link, []byte("old"), 0o600))
			}
			// A directory where the file goes: the rename fails.
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "name", "sub"), 0o700))
			linked, err := NewRoot(dir).WriteDurableLinked(dir, "name", ".tmp-*", []byte("new"), link)
			require.Error(t, err)
			require.NotErrorIs(t, err, ErrNotDurable)
			assert.False(t, linked)
			des, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, de := range des {
				names = append(names, de.Name())
			}
			if !tc.linkExists {
				assert.Equal(t, []string{"name"}, names, "no temporary file, no link")
				return
			}
			assert.Equal(t, []string{"link", "name"}, names, "no temporary file")
			b, err := os.ReadFile(link)
			require.NoError(t, err)
			assert.Equal(t, "old", string(b), "the existing link is kept")
		})
	}
}
