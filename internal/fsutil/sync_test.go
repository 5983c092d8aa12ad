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
	require.NoError(t, WriteDurableLinked(dir, "name", ".tmp-*", []byte("one"), link))
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

	require.NoError(t, WriteDurableLinked(dir, "name", ".tmp-*", []byte("two"), link))
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
