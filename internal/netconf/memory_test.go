package netconf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// memoryLoader creates a loader that reads src, with the env's bin dir
// and exec; set changes the config first.
func (e *env) memoryLoader(t *testing.T, src *MemorySource, set func(*Config)) *Loader {
	t.Helper()
	return e.loader(t, func(c *Config) {
		c.Memory = src
		if set != nil {
			set(c)
		}
	})
}

// TestMemoryLoadsAsFilesDo loads the same configs once as files of the
// conf dir and once from memory, and finds the same networks, default,
// policies and skips: the two share every step after the read.
func TestMemoryLoadsAsFilesDo(t *testing.T) {
	configs := []string{
		conflistOf("b-first", "good"),
		conflistOf("a", "good", "good"),
		conflistOf("-bad-name", "good"),
		`{"cniVersion":"1.0.0","name":"noplugins","plugins":[]}`,
		`{"cniVersion":"x.y","name":"badversion","plugins":[{"type":"good"}]}`,
		conflistOf("badtype", "../good"),
		conflistOf("missing", "nope"),
		`{"cniVersion":"1.0.0","name":"badpolicy","ocicni.teardownPolicy":"lax","plugins":[{"type":"good"}]}`,
		`{"cniVersion":"1.0.0","name":"tolerant","ocicni.teardownPolicy":"tolerant","plugins":[{"type":"good"}]}`,
		conflistOf("a", "good"), // a duplicate: the first one wins
		`not json`,
	}
	e := newEnv(t)
	mems := make([]MemoryConfig, len(configs))
	for i, c := range configs {
		name := fmt.Sprintf("%02d.conflist", i)
		e.write(t, name, c)
		mems[i] = MemoryConfig{Name: name, Bytes: []byte(c)}
	}
	var src MemorySource
	src.Set(mems...)
	fromFiles := e.loader(t, nil).Snapshot()
	fromMemory := e.memoryLoader(t, &src, nil).Snapshot()

	assert.Equal(t, []string{"a", "b-first", "tolerant"}, fromMemory.Names())
	assert.Equal(t, fromFiles.Names(), fromMemory.Names())
	assert.Equal(t, "b-first", fromMemory.DefaultName())
	assert.Equal(t, fromFiles.DefaultName(), fromMemory.DefaultName())
	for name, n := range fromFiles.All() {
		m := fromMemory.Network(name)
		require.NotNil(t, m, name)
		assert.Equal(t, filepath.Base(n.File), m.File, name)
		assert.Equal(t, n.Policy, m.Policy, name)
		assert.Equal(t, n.List.Bytes, m.List.Bytes, name)
	}
	skips := func(set *Set) []string {
		var out []string
		for _, sk := range set.Skipped() {
			out = append(out, fmt.Sprintf("%s %q %v", filepath.Base(sk.File), sk.Network, skipKind(sk)))
		}
		return out
	}
	assert.Len(t, fromMemory.Skipped(), 7)
	assert.Equal(t, skips(fromFiles), skips(fromMemory))
}

func TestMemorySetAndLoad(t *testing.T) {
	e := newEnv(t)
	e.write(t, "10-file.conflist", conflistOf("file", "good")) // never read
	src := &MemorySource{}
	l := e.memoryLoader(t, src, nil)
	assert.Equal(t, []string{}, l.Snapshot().Names())

	src.Set(MemoryConfig{Name: "0", Bytes: []byte(conflistOf("a", "good"))}, MemoryConfig{Name: "1", Bytes: []byte(conflistOf("b", "good"))})
	require.NoError(t, l.Load(context.Background()))
	first := l.Snapshot()
	assert.Equal(t, []string{"a", "b"}, first.Names())
	assert.Equal(t, "a", first.DefaultName())
	assert.Equal(t, "0", first.Network("a").File)

	// Unchanged bytes keep their parse; a new order makes a new default.
	src.Set(MemoryConfig{Name: "0", Bytes: []byte(conflistOf("b", "good"))}, MemoryConfig{Name: "1", Bytes: first.Network("a").List.Bytes})
	require.NoError(t, l.Load(context.Background()))
	second := l.Snapshot()
	assert.Equal(t, "b", second.DefaultName())
	require.NoError(t, l.Load(context.Background()))
	assert.Same(t, second.Network("a").List, l.Snapshot().Network("a").List)
	assert.Same(t, second.Network("b").List, l.Snapshot().Network("b").List)

	// A name that repeats is skipped; so is everything that is gone.
	src.Set(MemoryConfig{Name: "0", Bytes: []byte(conflistOf("c", "good"))}, MemoryConfig{Name: "0", Bytes: []byte(conflistOf("d", "good"))})
	require.NoError(t, l.Load(context.Background()))
	assert.Equal(t, []string{"c"}, l.Snapshot().Names())
	require.Len(t, l.Snapshot().Skipped(), 1)
	sk := l.Snapshot().Skipped()[0]
	require.ErrorIs(t, sk, ErrInvalidConfig)
	assert.Equal(t, "0", sk.File)
	assert.Equal(t, "d", sk.Network)

	src.Set()
	require.NoError(t, l.Load(context.Background()))
	assert.Equal(t, []string{}, l.Snapshot().Names())
	assert.Empty(t, l.Snapshot().DefaultName())
}

func TestMemoryLookupAndNotFound(t *testing.T) {
	e := newEnv(t)
	src := &MemorySource{}
	l := e.memoryLoader(t, src, func(c *Config) { c.DefaultNetwork = "late" })
	assert.Equal(t, "late", l.Snapshot().DefaultName())
	src.Set(MemoryConfig{Name: "late", Bytes: []byte(conflistOf("late", "good"))}, MemoryConfig{Name: "broken", Bytes: []byte(conflistOf("broken", "nope"))})

	// A lookup that misses loads the source, as it loads the conf dir.
	var n *Network
	var set *Set
	var err error
	testenv.Within(t, loadBound, "Lookup", func() { n, set, err = l.Lookup(context.Background(), l.Snapshot(), "late") })
	require.NoError(t, err)
	assert.Equal(t, "late", n.Name)

	testenv.Within(t, loadBound, "Lookup", func() { _, _, err = l.Lookup(context.Background(), set, "broken") })
	require.ErrorIs(t, err, ErrNetworkNotFound)
	require.ErrorIs(t, err, ErrPluginNotFound)
	var nf *NetworkNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "memory", nf.ConfDir)
	require.Len(t, nf.Skipped, 1)
	assert.Equal(t, "broken", nf.Skipped[0].File)
}

// TestMemoryReadsNoDisk: a memory loader starts no watcher even when
// asked for one, and a list without loadOnlyInlinedPlugins gets no
// plugins from a sub-folder named after it.
func TestMemoryReadsNoDisk(t *testing.T) {
	e := newEnv(t)
	e.install(t, "extra")
	require.NoError(t, os.Mkdir(filepath.Join(e.confDir, "a"), 0o755))
	e.write(t, filepath.Join("a", "10-extra.conf"), `{"type":"extra"}`)
	e.write(t, "10-a.conflist", conflistOf("a", "good"))
	files := e.loader(t, nil)
	require.Equal(t, []string{"good", "extra"}, pluginTypes(files.Snapshot(), "a"), "the files' loader reads the sub-folder")

	var src MemorySource
	src.Set(MemoryConfig{Name: "a", Bytes: []byte(conflistOf("a", "good"))})
	l := e.memoryLoader(t, &src, func(c *Config) { c.Watch = true })
	assert.Nil(t, l.watcher)
	assert.Equal(t, []string{"good"}, pluginTypes(l.Snapshot(), "a"))
	l.Shutdown()
	require.NoError(t, l.Load(context.Background()), "a memory loader keeps serving after Shutdown")
}

// TestMemoryInvalidKeepsNoLastGood: a file that turns invalid keeps its
// last valid parse (it may be half-written); a config held in memory is
// never half-written, so its network goes.
func TestMemoryInvalidKeepsNoLastGood(t *testing.T) {
	e := newEnv(t)
	var src MemorySource
	src.Set(MemoryConfig{Name: "0", Bytes: []byte(conflistOf("a", "good"))})
	l := e.memoryLoader(t, &src, nil)
	require.NotNil(t, l.Snapshot().Network("a"))
	src.Set(MemoryConfig{Name: "0", Bytes: []byte(`{"name":"a",`)})
	require.NoError(t, l.Load(context.Background()))
	assert.Nil(t, l.Snapshot().Network("a"))
	require.Len(t, l.Snapshot().Skipped(), 1)
	assert.ErrorIs(t, l.Snapshot().Skipped()[0], ErrInvalidConfig)
}
