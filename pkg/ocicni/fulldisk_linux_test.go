package ocicni

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// fullDiskSize is the size of the tmpfs the full-disk tests fill: room
// for the records, saved configs and cache entries of two sandboxes, and
// the levels of free space they leave.
const fullDiskSize = 256 << 10

// fullDiskEnv is a fakeEnv whose cache dir is on a tmpfs of its own, with
// the filler file beside it.
func fullDiskEnv(t *testing.T) (env *fakeEnv, filler string) {
	t.Helper()
	root := testenv.Tmpfs(t, fullDiskSize)
	env = newFakeEnv(t)
	env.cacheDir = filepath.Join(root, "cache")
	require.NoError(t, os.Mkdir(env.cacheDir, 0o700))
	return env, filepath.Join(root, "filler")
}

// pod returns the sandbox id of the env's netns.
func (e *fakeEnv) pod(id string) PodNetwork {
	return PodNetwork{Name: id, Namespace: "ns", ID: id, NetNS: e.nsPath}
}

// cacheOwn drops from a tree of the cache dir what the cache keeps for
// itself whoever its sandboxes are: its directories, the retired records
// it reuses (see [cache.IsSpareFile]) and the node gate's lock files. A
// sandbox's lock file stays in: it goes with the sandbox's record.
func cacheOwn(tree map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, size := range tree {
		if size >= 0 && !cache.IsSpareFile(path.Base(name)) && !slices.Contains(layoutFiles, name) {
			out[name] = size
		}
	}
	return out
}

// namesOf lists the files of tree that name sandbox id: its record, its
// links to saved configs, its cache entries.
func namesOf(tree map[string]int64, id string) []string {
	var out []string
	for name, size := range tree {
		if size >= 0 && strings.Contains(path.Base(name), id) {
			out = append(out, name)
		}
	}
	return out
}

// A setup on a full disk fails before any plugin runs and leaves the cache
// dir as it found it, whatever step of the durable record ran out of
// space and whatever the dir already held: nothing (a node's first pod),
// or the live record of the same sandbox, which then keeps its live
// network and adds a second one, and another sandbox's record sharing
// the live network's saved copy. A setup that fits is torn down on the
// same full disk, and then leaves nothing of its sandbox.
func TestSetupOnFullDiskLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before sets up what the cache dir holds before the levels; a
		// second network, net2, is then added to the env's conf dir.
		before []string
	}{
		{name: "fresh"},
		{name: "resetup", before: []string{"pod0", "pod1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcomes := map[string]int{}
			for free := int64(0); free <= 16<<10; free += 512 {
				t.Run(fmt.Sprint(free), func(t *testing.T) { outcomes[fullDiskLevel(t, free, tc.before)]++ })
			}
			t.Logf("outcomes by level: %v", outcomes)
			assert.Positive(t, outcomes[unrecorded], "some levels fail to record")
			assert.Positive(t, outcomes[setUp], "some levels set up")
		})
	}
}

// The outcomes of a setup on a full disk.
const (
	unrecorded = "failed before ADD"
	rolledBack = "failed in ADD, rolled back"
	setUp      = "set up and torn down"
)

// fullDiskLevel runs the setup of TestSetupOnFullDiskLeavesNothing with
// free bytes left on the cache dir's file system, and returns its outcome.
func fullDiskLevel(t *testing.T, free int64, before []string) string {
	t.Helper()
	ctx := context.Background()
	env, filler := fullDiskEnv(t)
	if len(before) > 0 {
		m, _ := env.manager(t)
		for _, id := range before {
			_, err := m.SetUpPodWithContext(ctx, env.pod(id))
			require.NoError(t, err)
		}
		require.NoError(t, m.Shutdown())
		writeConf(t, env.confDir, "20-net2.conflist",
			`{"cniVersion":"1.0.0","name":"net2","plugins":[{"type":"fake","second":true}]}`)
	}
	m, fx := env.manager(t, withConfigGrace(0))
	got := testenv.FillTo(t, filler, free)
	t.Logf("%d bytes free (%d asked)", got, free)
	tree := testenv.Tree(t, env.cacheDir)

	pod := env.pod("pod1")
	if len(before) > 0 { // pod1 holds net live: it is kept, net2 is added
		pod.Networks = []NetAttachment{{Name: "net"}, {Name: "net2"}}
	}
	_, err := m.SetUpPodWithContext(ctx, pod)
	after := testenv.Tree(t, env.cacheDir)
	outcome := setUp
	switch {
	case err != nil && len(fx.Calls("ADD")) == 0:
		require.ErrorIs(t, err, syscall.ENOSPC)
		assert.Empty(t, fx.Calls(), "no plugin ran")
		require.ErrorContains(t, err, "recording its attachments before ADD")
		assert.Equal(t, withLayout(tree), withLayout(after), "the cache dir holds what it held before the setup")
		return unrecorded
	case err != nil:
		// The record fit, the ADD's cache entry did not: the rollback
		// removes the attachment.
		var serr *SetupError
		require.ErrorAs(t, err, &serr)
		assert.NotEmpty(t, fx.Calls("DEL"), "rolled back")
		outcome = rolledBack
		if len(before) > 0 {
			require.NoError(t, m.TearDownPodWithContext(ctx, env.pod(pod.ID)), "teardown of the live net on the same full disk")
		}
	default:
		require.NoError(t, m.TearDownPodWithContext(ctx, env.pod(pod.ID)), "teardown on the same full disk")
	}
	after = testenv.Tree(t, env.cacheDir)
	assert.Empty(t, namesOf(after, pod.ID), "nothing of the sandbox is left")
	var valid []*PodNetwork
	if len(before) > 0 {
		p0 := env.pod("pod0")
		valid = append(valid, &p0)
	}
	require.NoError(t, m.GC(ctx, valid))
	assert.Equal(t, withoutSandbox(cacheOwn(tree), pod.ID), cacheOwn(testenv.Tree(t, env.cacheDir)),
		"after GC, what the cache dir held before the setup, but the sandbox")
	return outcome
}

// layoutDirs are the directories of the cache layout that the first setup
// of a node makes, and that nothing removes: other sandboxes' setups,
// which take no lock in common, may be about to write into them. The
// node gate's two empty lock files stay with them.
var (
	layoutDirs  = []string{"ocicni", "ocicni/attachments", "ocicni/configs", "ocicni/locks"}
	layoutFiles = []string{"ocicni/locks/.node", "ocicni/locks/.turn"}
)

// withLayout adds layoutDirs and layoutFiles to tree, and drops the
// spare files (retired records and lock files the cache keeps to reuse,
// see [cache.IsSpareFile]), which are the layout's too.
func withLayout(tree map[string]int64) map[string]int64 {
	out := maps.Clone(tree)
	maps.DeleteFunc(out, func(name string, _ int64) bool { return cache.IsSpareFile(path.Base(name)) })
	for _, d := range layoutDirs {
		out[d] = -1
	}
	for _, f := range layoutFiles {
		out[f] = 0
	}
	return out
}

// withoutSandbox drops sandbox id's files from tree.
func withoutSandbox(tree map[string]int64, id string) map[string]int64 {
	for _, name := range namesOf(tree, id) {
		delete(tree, name)
	}
	return tree
}

// Teardown and GC need no free space: on a disk filled to the last byte
// after two setups, the teardown of one sandbox and the GC of the other
// (stale) delete both and leave nothing of them, nor of their configs
// once the next GC swept the copy that the stale sandbox's record still
// linked when the first one listed the records.
func TestTeardownAndGCOnFullDisk(t *testing.T) {
	ctx := context.Background()
	env, filler := fullDiskEnv(t)
	m, fx := env.manager(t, withConfigGrace(0))
	for _, id := range []string{"pod1", "pod2"} {
		_, err := m.SetUpPodWithContext(ctx, env.pod(id))
		require.NoError(t, err)
	}
	require.Zero(t, testenv.FillTo(t, filler, 0))

	require.NoError(t, m.TearDownPodWithContext(ctx, env.pod("pod1")))
	require.NoError(t, m.GC(ctx, nil))
	require.NoError(t, m.GC(ctx, nil))
	assert.Len(t, fx.Calls("DEL"), 2, "one DEL per sandbox")
	assert.Empty(t, cacheOwn(testenv.Tree(t, env.cacheDir)),
		"no record, link, saved config or cache entry is left")
	t.Logf("%d bytes free after", testenv.FreeBytes(t, env.cacheDir))
	assert.Positive(t, testenv.FreeBytes(t, env.cacheDir), "the cache entries and the saved config are freed")
}
