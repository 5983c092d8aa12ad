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

// gcScopeWant is what one GC with no valid pod leaves, in one of the
// three scopes.
type gcScopeWant struct {
	dels    []string            // "container network ifname", in any order
	files   []string            // the results dir's file names left
	records map[string][]string // container: "network ifname" lines left; nil: no record
	links   int                 // the saved-config links left
	errs    bool                // whether GC reports a failure
}

// TestGCScopedToLoadedNetworks runs GC with no valid pod over a cache dir
// that holds attachments of "loaded", the only network in the conf dir,
// and of networks it does not load: "other", which another runtime
// sharing the cache dir loaded, and "removed", whose file is gone. By
// default GC acts on what is this library's: the attachments the order
// records name, of any network, and the others of "loaded"; the
// unrecorded attachments of "other" are not removed, rewritten or
// reported. With ocicni.WithGCScopedToLoadedNetworks, only the
// attachments of "loaded" get a DEL; with ocicni.WithGCAllNetworks, GC
// acts on every one, as the default did before.
func TestGCScopedToLoadedNetworks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		seed               func(t *testing.T, env *ocicnitest.Env)
		owned, scoped, all gcScopeWant
	}{
		{
			name: "cache entries of two networks",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "mine"})
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "theirs"})
			},
			owned:  gcScopeWant{dels: []string{"mine loaded eth0"}, files: []string{"other-theirs-eth0"}},
			scoped: gcScopeWant{dels: []string{"mine loaded eth0"}, files: []string{"other-theirs-eth0"}},
			all:    gcScopeWant{dels: []string{"mine loaded eth0", "theirs other eth0"}},
		},
		{
			name: "one sandbox on both networks",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "both"})
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "both", IfName: "eth1"})
				env.WriteOrder(t, "both", cache.Attachment{Network: "loaded", IfName: "eth0"}, cache.Attachment{Network: "other", IfName: "eth1"})
			},
			// The record makes both attachments this library's.
			owned: gcScopeWant{dels: []string{"both loaded eth0", "both other eth1"}},
			scoped: gcScopeWant{
				dels: []string{"both loaded eth0"}, files: []string{"other-both-eth1"},
				records: map[string][]string{"both": {"other eth1"}},
			},
			all: gcScopeWant{dels: []string{"both loaded eth0", "both other eth1"}},
		},
		{
			name: "a recorded attachment of a removed network",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "removed", ContainerID: "gone"})
				digest, err := cache.New(env.CacheDir).SaveConfig("gone", ocicnitest.Conflist("removed", "1.0.0", ocicnitest.DefaultPluginType))
				require.NoError(t, err)
				env.WriteOrder(t, "gone", cache.Attachment{Network: "removed", IfName: "eth0", Config: digest})
			},
			owned: gcScopeWant{dels: []string{"gone removed eth0"}},
			scoped: gcScopeWant{
				files: []string{"removed-gone-eth0"}, records: map[string][]string{"gone": {"removed eth0"}}, links: 1,
			},
			all: gcScopeWant{dels: []string{"gone removed eth0"}},
		},
		{
			name: "attachments only the record names",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteOrder(t, "rec-mine", cache.Attachment{Network: "loaded", IfName: "eth0"})
				env.WriteOrder(t, "rec-other", cache.Attachment{Network: "other", IfName: "eth0"})
			},
			// Without a config for "other", its line is Orphaned and stays.
			owned:  gcScopeWant{dels: []string{"rec-mine loaded eth0"}, records: map[string][]string{"rec-other": {"other eth0"}}, errs: true},
			scoped: gcScopeWant{dels: []string{"rec-mine loaded eth0"}, records: map[string][]string{"rec-other": {"other eth0"}}},
			all:    gcScopeWant{dels: []string{"rec-mine loaded eth0"}, records: map[string][]string{"rec-other": {"other eth0"}}, errs: true},
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
			owned: gcScopeWant{
				dels:  []string{"junk1 loaded eth0"},
				files: []string{"elsewhere-x-eth0", "other-theirs-eth0", "other-theirs-eth1"},
			},
			scoped: gcScopeWant{
				dels:  []string{"junk1 loaded eth0"},
				files: []string{"elsewhere-x-eth0", "other-theirs-eth0", "other-theirs-eth1"},
			},
			all: gcScopeWant{
				dels:  []string{"junk1 loaded eth0", "theirs other eth0"},
				files: []string{"elsewhere-x-eth0", "other-theirs-eth1"}, errs: true,
			},
		},
		{
			name: "an unreadable record",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "badrec"})
				env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "badrec", IfName: "eth1"})
				require.NoError(t, os.MkdirAll(cache.New(env.CacheDir).OrdersDir(), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(cache.New(env.CacheDir).OrdersDir(), "badrec"), []byte("{"), 0o600))
			},
			// The record cannot tell whether "other" is this library's.
			owned:  gcScopeWant{dels: []string{"badrec loaded eth0"}, files: []string{"other-badrec-eth1"}, records: map[string][]string{"badrec": nil}},
			scoped: gcScopeWant{dels: []string{"badrec loaded eth0"}, files: []string{"other-badrec-eth1"}, records: map[string][]string{"badrec": nil}},
			all:    gcScopeWant{dels: []string{"badrec loaded eth0", "badrec other eth1"}},
		},
		{
			name: "saved-config links without a record",
			seed: func(t *testing.T, env *ocicnitest.Env) {
				t.Helper()
				_, err := cache.New(env.CacheDir).SaveConfig("killed", ocicnitest.Conflist("other", "1.0.0", "bridge"))
				require.NoError(t, err)
			},
			owned:  gcScopeWant{},
			scoped: gcScopeWant{links: 1},
			all:    gcScopeWant{},
		},
	} {
		for _, mode := range []struct {
			name string
			opts []ocicni.Option
			want gcScopeWant
			// reports says which outcomes GC may report, given the
			// records' lines as seeded.
			reports func(o ocicni.Outcome, recorded map[string][]string) bool
		}{
			{
				name: "owned", want: tc.owned,
				reports: func(o ocicni.Outcome, recorded map[string][]string) bool {
					return o.Network == "loaded" || slices.Contains(recorded[o.ContainerID], o.Network+" "+o.IfName)
				},
			},
			{
				name: "scoped", opts: []ocicni.Option{ocicni.WithGCScopedToLoadedNetworks()}, want: tc.scoped,
				reports: func(o ocicni.Outcome, _ map[string][]string) bool { return o.Network == "loaded" },
			},
			{
				name: "all", opts: []ocicni.Option{ocicni.WithGCAllNetworks()}, want: tc.all,
				reports: func(ocicni.Outcome, map[string][]string) bool { return true },
			},
		} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				env := ocicnitest.NewEnv(t)
				env.WriteConflist(t, "loaded", "1.0.0", "bridge")
				tc.seed(t, env)
				recorded := recordLines(t, env)
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
					assert.True(t, mode.reports(o, recorded), "GC reports only what is in its scope: %+v", o)
				}
				assert.ElementsMatch(t, mode.want.files, resultFiles(t, env), "cache files left")
				assertRecords(t, env, mode.want.records)
				assert.Equal(t, mode.want.links, countLinks(t, env), "saved-config links left")
			})
		}
	}
}

// TestGCScopeLastOptionWins checks that of WithGCScopedToLoadedNetworks
// and WithGCAllNetworks the last one given decides, as a face's option
// given first is overridden by its caller's.
func TestGCScopeLastOptionWins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []ocicni.Option
		dels []string
	}{
		{
			name: "scoped then all",
			opts: []ocicni.Option{ocicni.WithGCScopedToLoadedNetworks(), ocicni.WithGCAllNetworks()},
			dels: []string{"mine loaded eth0", "theirs other eth0"},
		},
		{
			name: "all then scoped",
			opts: []ocicni.Option{ocicni.WithGCAllNetworks(), ocicni.WithGCScopedToLoadedNetworks()},
			dels: []string{"mine loaded eth0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := ocicnitest.NewEnv(t)
			env.WriteConflist(t, "loaded", "1.0.0", "bridge")
			env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "loaded", ContainerID: "mine"})
			env.WriteCacheEntry(t, ocicnitest.CacheEntry{Network: "other", ContainerID: "theirs"})
			m := env.NewManager(t, tc.opts...)

			require.NoError(t, m.GC(context.Background(), nil))

			var dels []string
			for _, c := range env.Exec.Calls("DEL") {
				dels = append(dels, c.ContainerID+" "+c.Network+" "+c.IfName)
			}
			assert.ElementsMatch(t, tc.dels, dels, "DELs")
		})
	}
}

// recordLines reads every order record as "network ifname" lines, by
// container; an unreadable one has none.
func recordLines(t *testing.T, env *ocicnitest.Env) map[string][]string {
	t.Helper()
	c := cache.New(env.CacheDir)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	out := map[string][]string{}
	for _, id := range ids {
		atts, _ := c.ReadOrder(id) // an unreadable record names nothing
		for _, a := range atts {
			out[id] = append(out[id], a.Network+" "+a.IfName)
		}
	}
	return out
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
