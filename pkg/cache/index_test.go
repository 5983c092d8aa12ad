package cache

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCandidateIDs(t *testing.T) {
	for name, want := range map[string][]string{
		"net-ctr-eth0":         {"ctr"},
		"my-net-abc-def-eth0":  {"net", "net-abc", "net-abc-def", "abc", "abc-def", "def"},
		"-ctr-eth0":            nil,
		"net--eth0":            nil,
		"net-ctr-":             nil,
		"noname":               nil,
		"net-c-e":              {"c"},
		"a-b-c-d":              {"b", "b-c", "c"},
		"net-abc-abc-eth0":     {"abc", "abc-abc"},
		"net-ctr-eth0.tmp-123": {"ctr", "ctr-eth0.tmp", "eth0.tmp"},
	} {
		assert.ElementsMatch(t, want, candidateIDs(name), name)
	}
}

// indexed returns a Cache with an index, and one without, on one fresh
// directory.
func indexed(t *testing.T) (withIndex, without *Cache) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the index needs inotify")
	}
	dir := t.TempDir()
	withIndex, without = New(dir), New(dir)
	require.NoError(t, withIndex.IndexResults())
	require.NoError(t, withIndex.IndexResults(), "twice is fine")
	t.Cleanup(func() { require.NoError(t, withIndex.Close()) })
	return withIndex, without
}

// requireSame checks that ForContainer answers the same with and without
// the index, for every id.
func requireSame(t *testing.T, a, b *Cache, ids []string, step string) {
	t.Helper()
	for _, id := range ids {
		la, erra := a.ForContainer(id)
		lb, errb := b.ForContainer(id)
		require.NoError(t, erra)
		require.NoError(t, errb)
		require.Equal(t, entryPaths(lb), entryPaths(la), "%s: entries of %s", step, id)
		require.Len(t, la.Corrupt, len(lb.Corrupt), "%s: corrupt files of %s", step, id)
		for i := range lb.Corrupt {
			require.Equal(t, lb.Corrupt[i].Path, la.Corrupt[i].Path, "%s: corrupt files of %s", step, id)
		}
	}
}

func entryPaths(l Listing) []string {
	var out []string
	for _, e := range l.Entries {
		out = append(out, e.Path)
	}
	return out
}

// A random sequence of what libcni, other libcni users, CRI-O's hand
// removals and an operator do to the results directory: the index answers
// exactly as a listing does after every step, from before the directory
// exists until after it is removed and made again.
func TestIndexAgreesWithListing(t *testing.T) {
	c, plain := indexed(t)
	d := &dirChurn{
		t:       t,
		rng:     rand.New(rand.NewPCG(1, 2)),
		ids:     []string{"ctr", "abc", "abc-def", "def", "x-y-z", "y", "gone"},
		nets:    []string{"net", "my-net", "net-abc", "cbr0"},
		ifs:     []string{"eth0", "eth1", "net1"},
		results: c.ResultsDir(),
		staged:  filepath.Join(c.Dir(), "staged"),
	}
	ids := d.ids
	requireSame(t, c, plain, ids, "no results directory")
	require.NoError(t, os.MkdirAll(d.results, 0o700))
	requireSame(t, c, plain, ids, "empty results directory")

	for step := range 400 {
		what, done := d.step()
		if !done {
			continue
		}
		if step%3 == 0 { // several changes between lookups, too
			requireSame(t, c, plain, ids, fmt.Sprintf("step %d (%s)", step, what))
		}
	}
	requireSame(t, c, plain, ids, "end")

	// The directory removed and made again: the index rebuilds itself.
	require.NoError(t, os.RemoveAll(d.results))
	requireSame(t, c, plain, ids, "results directory removed")
	require.NoError(t, os.MkdirAll(d.results, 0o700))
	name, data := d.entry()
	require.NoError(t, os.WriteFile(filepath.Join(d.results, name), data, 0o600))
	requireSame(t, c, plain, ids, "results directory made again")
	require.True(t, c.nameIndex().watching, "the index watches the new directory")
}

// dirChurn makes random changes to a results directory. Every choice
// comes from rng, so a seed replays the same sequence.
type dirChurn struct {
	t              *testing.T
	rng            *rand.Rand
	ids, nets, ifs []string // what entry names are made of
	results        string   // the results directory
	staged         string   // where an atomic writer stages a file, outside results
}

// step makes one random change and describes it. done is false when the
// change was skipped, because it would have replaced a directory.
func (d *dirChurn) step() (what string, done bool) {
	switch op := d.rng.IntN(10); {
	case op < 5:
		return d.write()
	case op < 7:
		return d.remove(), true
	case op < 8:
		return d.rename()
	case op < 9:
		return d.mkdir(), true
	default:
		return d.renameIn()
	}
}

// write writes an entry, or a corrupt file, in place.
func (d *dirChurn) write() (string, bool) {
	name, data := d.entry()
	if d.isDir(name) {
		return "", false
	}
	require.NoError(d.t, os.WriteFile(filepath.Join(d.results, name), data, 0o600))
	return "write " + name, true
}

// remove removes an existing file or directory, if there is one.
func (d *dirChurn) remove() string {
	name := d.existing()
	if name == "" {
		return ""
	}
	require.NoError(d.t, os.RemoveAll(filepath.Join(d.results, name)))
	return "remove " + name
}

// rename renames an existing file or directory to an entry's name,
// unless that would replace a directory.
func (d *dirChurn) rename() (string, bool) {
	name := d.existing()
	if name == "" {
		return "", true
	}
	to, _ := d.entry()
	if d.isDir(to) || d.isDir(name) && d.exists(to) {
		return "", false
	}
	require.NoError(d.t, os.Rename(filepath.Join(d.results, name), filepath.Join(d.results, to)))
	return "rename " + name + " to " + to, true
}

// mkdir makes a directory with an entry's name, if nothing has it yet.
func (d *dirChurn) mkdir() string {
	name, _ := d.entry()
	if err := os.Mkdir(filepath.Join(d.results, name), 0o700); err != nil {
		require.ErrorIs(d.t, err, os.ErrExist)
	}
	return "mkdir " + name
}

// renameIn renames an entry in from outside, as an atomic writer does.
func (d *dirChurn) renameIn() (string, bool) {
	name, data := d.entry()
	if d.isDir(name) {
		return "", false
	}
	require.NoError(d.t, os.WriteFile(d.staged, data, 0o600))
	require.NoError(d.t, os.Rename(d.staged, filepath.Join(d.results, name)))
	return "rename in " + name, true
}

// entry returns a random entry's file name and content; one in eight is
// corrupt.
func (d *dirChurn) entry() (string, []byte) {
	id, n, ifn := d.ids[d.rng.IntN(len(d.ids))], d.nets[d.rng.IntN(len(d.nets))], d.ifs[d.rng.IntN(len(d.ifs))]
	data := fmt.Appendf(nil, `{"kind":"cniCacheV1","containerId":%q,"networkName":%q,"ifName":%q,"config":"e30="}`, id, n, ifn)
	if d.rng.IntN(8) == 0 {
		data = []byte("{corrupt")
	}
	return n + "-" + id + "-" + ifn, data
}

// existing returns the name of a random file or directory in results, or
// "" when it is empty.
func (d *dirChurn) existing() string {
	des, err := os.ReadDir(d.results)
	require.NoError(d.t, err)
	if len(des) == 0 {
		return ""
	}
	return des[d.rng.IntN(len(des))].Name()
}

func (d *dirChurn) isDir(name string) bool {
	fi, err := os.Lstat(filepath.Join(d.results, name))
	return err == nil && fi.IsDir()
}

func (d *dirChurn) exists(name string) bool {
	_, err := os.Lstat(filepath.Join(d.results, name))
	return err == nil
}

// The inotify instance is made at the first lookup, and Close releases it.
func TestIndexHoldsInotifyOnlyOnceUsed(t *testing.T) {
	c, _ := indexed(t)
	before := inotifyInstances(t)
	require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
	assert.Equal(t, before, inotifyInstances(t), "none before the first lookup")
	_, err := c.ForContainer("ctr")
	require.NoError(t, err)
	assert.Equal(t, before+1, inotifyInstances(t), "one once used")
	require.NoError(t, c.Close())
	assert.Equal(t, before, inotifyInstances(t), "none after Close")
}

// inotifyInstances counts this process's inotify instances. Tests that
// count them do not run in parallel.
func inotifyInstances(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// After Close, ForContainer lists the directory again.
func TestIndexClose(t *testing.T) {
	c, plain := indexed(t)
	require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
	writeResult(t, c, "net-ctr-eth0", []byte(`{"kind":"cniCacheV1","containerId":"ctr","networkName":"net","ifName":"eth0"}`))
	requireSame(t, c, plain, []string{"ctr"}, "indexed")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "twice is fine")
	writeResult(t, c, "net-ctr-eth1", []byte(`{"kind":"cniCacheV1","containerId":"ctr","networkName":"net","ifName":"eth1"}`))
	l, err := c.ForContainer("ctr")
	require.NoError(t, err)
	assert.Len(t, l.Entries, 2)
}

func TestIndexResultsUnsupported(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("inotify is there")
	}
	err := New(t.TempDir()).IndexResults()
	require.ErrorIs(t, err, ErrNoIndex)
}
