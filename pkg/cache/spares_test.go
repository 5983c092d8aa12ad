package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spareFiles returns the names of the retired records in dir.
func spareFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), spareFilePrefix) {
			out = append(out, de.Name())
		}
	}
	return out
}

func TestRemovedRecordIsReusedByTheNextWrite(t *testing.T) {
	c := New(t.TempDir())
	long := []Attachment{{Network: "net-with-a-long-name", IfName: "eth0", NetNS: "/run/netns/a-long-netns-name"}, {Network: "b", IfName: "eth1"}}
	require.NoError(t, c.WriteOrder("old", long))
	oldPath := filepath.Join(c.OrdersDir(), "old")
	oldFile, err := os.Stat(oldPath)
	require.NoError(t, err)

	require.NoError(t, c.RemoveOrder("old"))
	got, err := c.ReadOrder("old")
	require.NoError(t, err)
	assert.Nil(t, got, "a retired record is gone for readers")
	assert.Len(t, spareFiles(t, c.OrdersDir()), 1)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Empty(t, ids, "spares are not records")

	short := []Attachment{{Network: "n", IfName: "eth0"}}
	require.NoError(t, c.WriteOrder("new", short))
	newFile, err := os.Stat(filepath.Join(c.OrdersDir(), "new"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(oldFile, newFile), "the retired file was reused, not a new one created")
	assert.Empty(t, spareFiles(t, c.OrdersDir()))
	assert.Equal(t, os.FileMode(0o600), newFile.Mode().Perm())
	got, err = c.ReadOrder("new")
	require.NoError(t, err)
	assert.Equal(t, short, got, "nothing of the longer old content is left")
}

func TestSparesAreBounded(t *testing.T) {
	c := New(t.TempDir())
	for i := range maxSpares + 8 {
		require.NoError(t, c.WriteOrder(idN(i), []Attachment{{Network: "n", IfName: "eth0"}}))
	}
	for i := range maxSpares + 8 {
		require.NoError(t, c.RemoveOrder(idN(i)))
	}
	assert.Len(t, spareFiles(t, c.OrdersDir()), maxSpares)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Empty(t, ids)
}

// TestConcurrentRemovalsKeepThePoolBounded removes records from several
// goroutines at once: each rename into the pool runs outside its lock, in
// a slot reserved under it, so the pool still ends with exactly maxSpares
// files, every other record is removed, and the next writes reuse them.
func TestConcurrentRemovalsKeepThePoolBounded(t *testing.T) {
	c := New(t.TempDir())
	const records, workers = maxSpares + 24, 8
	for i := range records {
		require.NoError(t, c.WriteOrder(idN(i), []Attachment{{Network: "n", IfName: "eth0"}}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, records)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < records; i += workers {
				errs <- c.RemoveOrder(idN(i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Len(t, spareFiles(t, c.OrdersDir()), maxSpares)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Empty(t, ids)

	for i := range maxSpares {
		require.NoError(t, c.WriteOrder(idN(records+i), []Attachment{{Network: "n", IfName: "eth0"}}))
	}
	assert.Empty(t, spareFiles(t, c.OrdersDir()), "every spare was reused")
}

// TestSparesOfAnEarlierProcessAreAdoptedOrRemoved plays a runtime that
// restarts: the new Cache takes over the old one's spares, and the old
// Cache, should it still run, falls back to creating files.
func TestSparesOfAnEarlierProcessAreAdoptedOrRemoved(t *testing.T) {
	dir := t.TempDir()
	first, other := New(dir), New(dir)
	for i := range maxSpares {
		require.NoError(t, first.WriteOrder(idN(i), nil))
		require.NoError(t, other.WriteOrder(idN(100+i), nil))
	}
	for i := range maxSpares {
		require.NoError(t, first.RemoveOrder(idN(i)))
		require.NoError(t, other.RemoveOrder(idN(100+i)))
	}
	require.Len(t, spareFiles(t, first.OrdersDir()), 2*maxSpares)

	second := New(dir)
	require.NoError(t, second.WriteOrder("fresh", []Attachment{{Network: "n", IfName: "eth0"}}))
	assert.Len(t, spareFiles(t, second.OrdersDir()), maxSpares-1, "adopted up to the bound, one reused, the rest removed")
	for _, name := range spareFiles(t, second.OrdersDir()) {
		assert.True(t, second.spares.Owns(name), "%s belongs to the new Cache", name)
	}

	// The first Cache's spares are gone: it creates files again.
	require.NoError(t, first.WriteOrder("late", []Attachment{{Network: "n", IfName: "eth1"}}))
	got, err := first.ReadOrder("late")
	require.NoError(t, err)
	assert.Equal(t, []Attachment{{Network: "n", IfName: "eth1"}}, got)
	ids, err := second.ListOrders()
	require.NoError(t, err)
	assert.Equal(t, []string{"fresh", "late"}, ids)
}

func TestVanishedSpareFallsBackToANewFile(t *testing.T) {
	c := New(t.TempDir())
	require.NoError(t, c.WriteOrder("a", nil))
	require.NoError(t, c.RemoveOrder("a"))
	spares := spareFiles(t, c.OrdersDir())
	require.Len(t, spares, 1)
	require.NoError(t, os.Remove(filepath.Join(c.OrdersDir(), spares[0])))

	require.NoError(t, c.WriteOrder("b", []Attachment{{Network: "n", IfName: "eth0"}}))
	got, err := c.ReadOrder("b")
	require.NoError(t, err)
	assert.Equal(t, []Attachment{{Network: "n", IfName: "eth0"}}, got)
}

func TestZeroCacheKeepsNoSpares(t *testing.T) {
	dir := t.TempDir()
	c := &Cache{dir: dir}
	require.NoError(t, c.WriteOrder("a", nil))
	require.NoError(t, c.RemoveOrder("a"))
	des, err := os.ReadDir(c.OrdersDir())
	require.NoError(t, err)
	assert.Empty(t, des)
}

func idN(i int) string { return fmt.Sprintf("id%03d", i) }
