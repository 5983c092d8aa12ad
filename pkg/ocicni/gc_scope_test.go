//go:build !nogctests

package ocicni_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// gcScopeWant is what one GC with no valid pod leaves, with or without
// ocicni.WithGCScopedToLoadedNetworks.
type gcScopeWant struct {
	dels    []string            // "container network ifname", in any order
	files   []string            // the results dir's file names left
	records map[string][]string // container: "network ifname" lines left; nil: no record
	links   int                 // the saved-config links left
	errs    bool                // whether GC reports a failure
}

// TestGCScopedToLoadedNetworks runs GC with no valid pod over a cache dir
// that holds attachments of "loaded", the only network in the conf dir,
// and of "other", which another runtime sharing the cache dir loaded. With
// the option, only the attachments of "loaded" get a DEL, and nothing of
// "other" is removed, rewritten or reported; without it, GC acts on both,
// as it always did.
func TestGCScopedToLoadedNetworks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		seed             func(t *testing.T, env *ocicnitest.Env)
		scoped, unscoped gcScopeWant
	}{
		{
			name: "cache entries of two networks",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "mine"})
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "theirs"})
			},
			scoped:   gcScopeWant{dels: []string{"mine loaded eth0"}, files: []string{"other-theirs-eth0"}},
			unscoped: gcScopeWant{dels: []string{"mine loaded eth0", "theirs other eth0"}},
		},
		{
			name: "one sandbox on both networks",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "both"})
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "both", IfName: "eth1"})
				env.WriteOrder(t, "both", cache.Attachment{Network: "loaded", IfName: "eth0"}, cache.Attachment{Network: "other", IfName: "eth1"})
			},
			scoped: gcScopeWant{
				dels: []string{"both loaded eth0"}, files: []string{"other-both-eth1"},
				records: map[string][]string{"both": {"other eth1"}},
			},
			unscoped: gcScopeWant{dels: []string{"both loaded eth0", "both other eth1"}},
		},
		{
			name: "attachments only the record names",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteOrder(t, "rec-mine", cache.Attachment{Network: "loaded", IfName: "eth0"})
				env.WriteOrder(t, "rec-theirs", cache.Attachment{Network: "other", IfName: "eth0"})
			},
			scoped: gcScopeWant{dels: []string{"rec-mine loaded eth0"}, records: map[string][]string{"rec-theirs": {"other eth0"}}},
			// Without a config for "other", its line is Orphaned and stays.
			unscoped: gcScopeWant{dels: []string{"rec-mine loaded eth0"}, records: map[string][]string{"rec-theirs": {"other eth0"}}, errs: true},
		},
		{
			name: "corrupt files",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "theirs"})
				writeJunk(t, env, "loaded-junk1-eth0") // names a loaded network
				writeJunk(t, env, "other-theirs-eth1") // a known sandbox, a network not loaded
				writeJunk(t, env, "elsewhere-x-eth0")  // no known sandbox or network
			},
			scoped: gcScopeWant{
				dels:  []string{"junk1 loaded eth0"},
				files: []string{"elsewhere-x-eth0", "other-theirs-eth0", "other-theirs-eth1"},
			},
			unscoped: gcScopeWant{
				dels:  []string{"junk1 loaded eth0", "theirs other eth0"},
				files: []string{"elsewhere-x-eth0", "other-theirs-eth1"}, errs: true,
			},
		},
		{
			name: "an unreadable record",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "badrec"})
				require.NoError(t, os.MkdirAll(cache.New(env.CacheDir).OrdersDir(), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(cache.New(env.CacheDir).OrdersDir(), "badrec"), []byte("{"), 0o600))
			},
			scoped:   gcScopeWant{dels: []string{"badrec loaded eth0"}, records: map[string][]string{"badrec": nil}},
			unscoped: gcScopeWant{dels: []string{"badrec loaded eth0"}},
		},
		{
			name: "saved-config links without a record",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				_, err := cache.New(env.CacheDir).SaveConfig("killed", ocicnitest.Conflist("other", "1.0.0", "bridge"))
				require.NoError(t, err)
			},
			scoped:   gcScopeWant{links: 1},
			unscoped: gcScopeWant{},
		},
	} {
		for _, mode := range []struct {
			name string
			opts []ocicni.Option
			want gcScopeWant
		}{
			{name: "scoped", opts: []ocicni.Option{ocicni.WithGCScopedToLoadedNetworks()}, want: tc.scoped},
			{name: "unscoped", want: tc.unscoped},
		} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				env := ocicnitest.NewEnv(t)
				env.WriteConflist(t, "loaded", "1.0.0", "bridge")
				tc.seed(t, env)
				m := env.NewManager(t, mode.opts...)

				outcomes, err := m.GCOutcomes(context.Background(), nil)

				if mode.want.errs {
					require.Error(t, err)
				} else {
					require.NoError(t, err)
				}
				var dels []string
				for _, c := range env.Exec.Calls("DEL") {
					dels = append(dels, c.ContainerID+" "+c.Network+" "+c.IfName)
				}
				assert.ElementsMatch(t, mode.want.dels, dels, "DELs")
				for _, o := range outcomes {
					if mode.opts != nil {
						assert.Equal(t, "loaded", o.Network, "a scoped GC reports only loaded networks: %+v", o)
					}
				}
				assert.ElementsMatch(t, mode.want.files, resultFiles(t, env), "cache files left")
				assertRecords(t, env, mode.want.records)
				assert.Equal(t, mode.want.links, countLinks(t, env), "saved-config links left")
			})
		}
	}
}

// writeJunk writes a corrupt cache file named name.
func writeJunk(t *testing.T, env *ocicnitest.Env, name string) {
	t.Helper()
	dir := cache.New(env.CacheDir).ResultsDir()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600))
}

// resultFiles lists the names of the files in the results dir.
func resultFiles(t *testing.T, env *ocicnitest.Env) []string {
	t.Helper()
	des, err := os.ReadDir(cache.New(env.CacheDir).ResultsDir())
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

// assertRecords checks that exactly the records of want are left, each
// with want's lines; a nil list stands for a record that cannot be read,
// left with its bytes.
func assertRecords(t *testing.T, env *ocicnitest.Env, want map[string][]string) {
	t.Helper()
	c := cache.New(env.CacheDir)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.ElementsMatch(t, slices.Sorted(maps.Keys(want)), ids, "records left")
	for id, lines := range want {
		atts, err := c.ReadOrder(id)
		if lines == nil {
			require.Error(t, err, "record %s stays unreadable", id)
			b, rerr := os.ReadFile(filepath.Join(c.OrdersDir(), id))
			require.NoError(t, rerr)
			assert.Equal(t, "{", string(b), "record %s is not rewritten", id)
			continue
		}
		require.NoError(t, err)
		var got []string
		for _, a := range atts {
			got = append(got, a.Network+" "+a.IfName)
		}
		assert.Equal(t, lines, got, "record %s", id)
	}
}

// countLinks counts the records' links to saved configs.
func countLinks(t *testing.T, env *ocicnitest.Env) int {
	t.Helper()
	des, err := os.ReadDir(cache.New(env.CacheDir).OrdersDir())
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for _, d := range des {
		if cache.IsConfigLink(d.Name()) {
			n++
		}
	}
	return n
}
