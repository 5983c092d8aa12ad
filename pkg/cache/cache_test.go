package cache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	assert.Equal(t, libcni.CacheDir, New("").Dir())
	assert.Equal(t, filepath.Join(libcni.CacheDir, "results"), New("").ResultsDir())
	assert.Equal(t, libcni.CacheDir, (&Cache{}).Dir())

	dir := t.TempDir()
	assert.Equal(t, dir, New(dir+"/").Dir())
	assert.Equal(t, filepath.Join(dir, "results"), New(dir).ResultsDir())
	assert.True(t, filepath.IsAbs(New("relative/dir").Dir()))
}

func TestListMissingDir(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "nope"))
	for name, f := range map[string]func() (Listing, error){
		"List":         c.List,
		"ForContainer": func() (Listing, error) { return c.ForContainer("abc") },
	} {
		l, err := f()
		require.NoError(t, err, name)
		assert.Equal(t, Listing{}, l, name)
	}
}

func TestList(t *testing.T) {
	c := newCacheFrom(t, "results")
	require.NoError(t, os.Mkdir(filepath.Join(c.ResultsDir(), "subdir-abc-eth0"), 0o700))

	l, err := c.List()
	require.NoError(t, err)
	assert.Empty(t, l.Corrupt)
	entries := l.Entries
	want, err := os.ReadDir(filepath.Join("testdata", "results"))
	require.NoError(t, err)
	require.Len(t, entries, len(want))
	for i, e := range entries {
		assert.Equal(t, filepath.Join(c.ResultsDir(), want[i].Name()), e.Path)
		assert.True(t, filepath.IsAbs(e.Path))
		name, err := FileName(e.Network, e.ContainerID, e.IfName)
		require.NoError(t, err)
		assert.Equal(t, want[i].Name(), name)
	}
}

func TestForContainer(t *testing.T) {
	c := newCacheFrom(t, "results")
	tests := []struct {
		id   string
		want []string
	}{
		{"abc", []string{"net1-abc-eth0", "net2-abc-eth1"}},
		{"abcd", []string{"net1-abcd-eth0"}},
		{"xabc", []string{"net1-xabc-eth0"}},
		{"ab", nil},
		{"bc", nil},
		{"abc-def", []string{"my-net-abc-def-net1"}},
		{"def-abc", []string{"net1-def-abc-eth0"}},
		{"def", nil},
		{"net1", nil},
		{"eth0", nil},
		{"cdup", []string{"dupA-cdup-eth0", "dupB-cdup-eth0"}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			l, err := c.ForContainer(tt.id)
			require.NoError(t, err)
			assert.Empty(t, l.Corrupt)
			assert.Equal(t, tt.want, nilIfEmpty(entryNames(l.Entries)))
			for _, e := range l.Entries {
				assert.Equal(t, tt.id, e.ContainerID)
			}
		})
	}
}

func TestLookupRejectsInvalidNames(t *testing.T) {
	c := newCacheFrom(t, "results")
	for _, bad := range []string{"", "..", "../x", "a/b", "a\x00", "a\n"} {
		_, err := c.ForContainer(bad)
		require.ErrorIs(t, err, ErrInvalidName, "%q", bad)
		_, err = c.Get("net1", bad, "eth0")
		require.ErrorIs(t, err, ErrInvalidName, "%q", bad)
		require.ErrorIs(t, c.Remove("net1", bad, "eth0"), ErrInvalidName, "%q", bad)
	}
}

type nameTriple struct{ network, id, ifname string }

// corruptWant is what the EntryError of each corrupt fixture must say.
var corruptWant = map[string]nameTriple{
	"badb64-bad-eth7":    {"badb64", "bad", "eth7"},
	"blank-bad-eth8":     {"blank", "bad", "eth8"},
	"empty-bad-eth0":     {"empty", "bad", "eth0"},
	"kind-bad-eth2":      {"kind", "bad", "eth2"},
	"nofields-bad-eth3":  {"nofields", "bad", "eth3"},
	"resultstr-bad-eth4": {"resultstr", "bad", "eth4"},
	"trunc-bad-eth1":     {"trunc", "bad", "eth1"},
}

func TestForContainerCorrupt(t *testing.T) {
	c := newCacheFrom(t, "corrupt")
	l, err := c.ForContainer("bad")
	require.NoError(t, err)
	assert.Equal(t, []string{"good-bad-eth5"}, entryNames(l.Entries), "good entries survive bad ones")

	got := entryErrors(l)
	assert.Len(t, got, len(corruptWant))
	for name, want := range corruptWant {
		ee := got[name]
		if !assert.NotNil(t, ee, name) {
			continue
		}
		assert.Equal(t, filepath.Join(c.ResultsDir(), name), ee.Path)
		assert.Equal(t, want, nameTriple{ee.Network, ee.ContainerID, ee.IfName}, name)
		require.ErrorIs(t, ee, ErrCorruptEntry, name)
		assert.Contains(t, ee.Error(), ee.Path)
	}
	assert.NotContains(t, got, "other-bad-eth6", "content names another container")
}

func TestListCorrupt(t *testing.T) {
	c := newCacheFrom(t, "corrupt")
	l, err := c.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"good-bad-eth5"}, entryNames(l.Entries))
	got := entryErrors(l)
	assert.Len(t, got, len(corruptWant)+1)
	for name, want := range corruptWant {
		if ee := got[name]; assert.NotNil(t, ee, name) && ee.ContainerID != "" {
			// Names are learnt only when the content names the container.
			assert.Equal(t, want, nameTriple{ee.Network, ee.ContainerID, ee.IfName}, name)
		}
	}
	// Its content names container "notbad", which its file name does not
	// hold: no name of it is trusted.
	other := got["other-bad-eth6"]
	require.NotNil(t, other)
	assert.Equal(t, nameTriple{}, nameTriple{other.Network, other.ContainerID, other.IfName})
	require.ErrorIs(t, other, ErrCorruptEntry)
}

// TestUnreadableEntry: an entry that cannot be read for a reason other
// than its content (here ENOTDIR, which root gets too: the results dir is a
// regular file) is an *EntryError that names the entry but is not
// ErrCorruptEntry, so that nobody deletes it as garbage.
func TestUnreadableEntry(t *testing.T) {
	c := New(t.TempDir())
	require.NoError(t, os.WriteFile(c.ResultsDir(), nil, 0o600))

	e, err := c.Get("good", "bad", "eth5")
	assert.Nil(t, e)
	var ee *EntryError
	require.ErrorAs(t, err, &ee)
	require.ErrorIs(t, ee, syscall.ENOTDIR)
	require.NotErrorIs(t, ee, ErrCorruptEntry)
	require.NotErrorIs(t, ee, fs.ErrNotExist)
	assert.Equal(t, filepath.Join(c.ResultsDir(), "good-bad-eth5"), ee.Path)
	assert.Equal(t, "good", ee.Network)
	assert.Equal(t, "bad", ee.ContainerID)
	assert.Equal(t, "eth5", ee.IfName)
}

func TestNonRegularEntry(t *testing.T) {
	c := New(t.TempDir())
	require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
	fifo := filepath.Join(c.ResultsDir(), "net1-abc-eth0")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(c.ResultsDir(), "net1-abc-eth1")))

	l, err := c.ForContainer("abc") // must not block on the FIFO
	require.NoError(t, err)
	assert.Empty(t, l.Entries)
	got := entryErrors(l)
	require.Len(t, got, 2)
	require.ErrorIs(t, got["net1-abc-eth0"], ErrCorruptEntry)
	require.ErrorIs(t, got["net1-abc-eth1"], ErrCorruptEntry, "libcni writes no symlinks")
	assert.Equal(t, "eth1", got["net1-abc-eth1"].IfName)
}

func TestGet(t *testing.T) {
	c := newCacheFrom(t, "corrupt")

	e, err := c.Get("good", "bad", "eth5")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(c.ResultsDir(), "good-bad-eth5"), e.Path)
	assert.Equal(t, "/var/run/netns/test-bad", e.NetNS)
	assert.Equal(t, [][2]string{{"IgnoreUnknown", "true"}}, e.CNIArgs)
	assert.Equal(t, "1.0.0", e.CNIVersion())

	_, err = c.Get("nope", "bad", "eth5")
	require.ErrorIs(t, err, fs.ErrNotExist)
	var ee *EntryError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, "nope", ee.Network)

	_, err = c.Get("trunc", "bad", "eth1")
	require.ErrorIs(t, err, ErrCorruptEntry)
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, nameTriple{"trunc", "bad", "eth1"}, nameTriple{ee.Network, ee.ContainerID, ee.IfName})
}

func TestRemove(t *testing.T) {
	c := newCacheFrom(t, "results")
	require.NoError(t, c.Remove("net1", "abc", "eth0"))
	require.NoError(t, c.Remove("net1", "abc", "eth0"), "absent is fine")
	_, err := c.Get("net1", "abc", "eth0")
	require.ErrorIs(t, err, fs.ErrNotExist)

	l, err := c.ForContainer("abc")
	require.NoError(t, err)
	assert.Equal(t, []string{"net2-abc-eth1"}, entryNames(l.Entries))

	require.NoError(t, New(filepath.Join(t.TempDir(), "nope")).Remove("a", "b", "c"))
}

func TestRemoveFile(t *testing.T) {
	c := newCacheFrom(t, "corrupt")
	outside := filepath.Join(c.Dir(), "keep")
	require.NoError(t, os.WriteFile(outside, nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(c.ResultsDir(), "sub"), 0o700))
	nested := filepath.Join(c.ResultsDir(), "sub", "x")
	require.NoError(t, os.WriteFile(nested, nil, 0o600))

	refused := []string{
		outside,
		c.ResultsDir(),
		c.ResultsDir() + "/",
		c.ResultsDir() + "/.",
		filepath.Join(c.ResultsDir(), ".."),
		c.ResultsDir() + "/../keep",
		nested,
		"/etc/passwd",
		"keep",
		"",
	}
	for _, p := range refused {
		require.ErrorIs(t, c.RemoveFile(p), ErrOutsideResults, "%q", p)
	}
	assert.FileExists(t, outside)
	assert.FileExists(t, nested)

	l, err := c.ForContainer("bad")
	require.NoError(t, err)
	for _, ee := range l.Corrupt {
		require.NoError(t, c.RemoveFile(ee.Path))
	}
	require.NoError(t, c.RemoveFile(filepath.Join(c.ResultsDir(), "sub", "..", "good-bad-eth5")))
	require.NoError(t, c.RemoveFile(filepath.Join(c.ResultsDir(), "good-bad-eth5")), "absent is fine")

	l, err = c.List()
	require.NoError(t, err)
	assert.Empty(t, l.Entries)
	assert.Equal(t, []string{"other-bad-eth6"}, keys(entryErrors(l)))
}

func TestExists(t *testing.T) {
	c := newCacheFrom(t, "corrupt")
	l, err := c.ForContainer("bad")
	require.NoError(t, err)
	require.NotEmpty(t, l.Corrupt)
	path := l.Corrupt[0].Path

	for _, tc := range []struct {
		name   string
		path   string
		exists bool
		err    error
	}{
		{name: "present", path: path, exists: true},
		{name: "relative to the results dir", path: filepath.Join(c.ResultsDir(), "sub", "..", filepath.Base(path)), exists: true},
		{name: "absent", path: filepath.Join(c.ResultsDir(), "none-bad-eth9")},
		{name: "outside", path: filepath.Join(c.Dir(), "keep"), err: ErrOutsideResults},
		{name: "the results dir", path: c.ResultsDir(), err: ErrOutsideResults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := c.Exists(tc.path)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.exists, ok)
		})
	}
	require.NoError(t, c.RemoveFile(path))
	ok, err := c.Exists(path)
	require.NoError(t, err)
	assert.False(t, ok, "gone once removed")
}

func TestRemoveFileError(t *testing.T) {
	c := New(t.TempDir())
	require.NoError(t, os.MkdirAll(filepath.Join(c.ResultsDir(), "full", "x"), 0o700))
	err := c.RemoveFile(filepath.Join(c.ResultsDir(), "full"))
	var ee *EntryError
	require.ErrorAs(t, err, &ee)
	assert.True(t, errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
