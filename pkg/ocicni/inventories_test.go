package ocicni

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// viewRow is what a test checks of one InventoryAttachment.
type viewRow struct {
	Network, IfName  string
	Cached           bool // a readable entry
	Corrupt, Guessed bool
	Unusable         bool // Err set
	Recorded         bool
	Pending          int // the pending retry's attempts; 0 for none
}

func rowsOf(sb *SandboxInventory) []viewRow {
	rows := []viewRow{}
	for _, a := range sb.Attachments {
		r := viewRow{
			Network: a.Name, IfName: a.Ifname, Cached: a.Entry != nil,
			Corrupt: a.Corrupt != nil, Guessed: a.NamesGuessed, Unusable: a.Err != nil, Recorded: a.Record != nil,
		}
		if a.Pending != nil {
			r.Pending = a.Pending.Attempts
		}
		rows = append(rows, r)
	}
	return rows
}

// inventoryEnv is a fake env with the networks "net" and "net2" loaded, and
// a manager on it without healing, so that a failed DEL stays pending.
type inventoryEnv struct {
	*fakeEnv
	m  *Manager
	fx *fakecni.Exec
}

func newInventoryEnv(t *testing.T, opts ...Option) *inventoryEnv {
	t.Helper()
	e := newFakeEnv(t)
	writeConf(t, e.confDir, "20-net2.conflist", conflist("net2", "1.0.0", "fake"))
	m, fx := e.manager(t, append([]Option{WithoutHealing()}, opts...)...)
	return &inventoryEnv{fakeEnv: e, m: m, fx: fx}
}

func (e *inventoryEnv) setUp(t *testing.T, id string, networks ...string) {
	t.Helper()
	pod := PodNetwork{ID: id, NetNS: e.nsPath}
	for _, n := range networks {
		pod.Networks = append(pod.Networks, NetAttachment{Name: n})
	}
	_, err := e.m.SetUpPodWithContext(context.Background(), pod)
	require.NoError(t, err)
}

// write writes a file under the cache dir.
func (e *inventoryEnv) write(t *testing.T, rel, content string) string {
	t.Helper()
	path := filepath.Join(e.cacheDir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestInventoryView(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, e *inventoryEnv)
		id      string
		want    []viewRow // of Inventory(id)
		// wantListed is what Inventories holds of id, when it differs:
		// there a corrupt file's content cannot tell its container, so its
		// names are guessed.
		wantListed   []viewRow
		wantUnusable int // files of id that name no attachment
		wantUnowned  int // files that Inventories cannot give to a sandbox
		recordErr    bool
	}{
		{name: "nothing known", prepare: func(*testing.T, *inventoryEnv) {}, id: "ctr", want: []viewRow{}},
		{
			name: "set up",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.setUp(t, "ctr", "net")
			},
			id:   "ctr",
			want: []viewRow{{Network: "net", IfName: "eth0", Cached: true, Recorded: true}},
		},
		{
			name: "in ADD order, not in file order",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.setUp(t, "ctr", "net2", "net")
			},
			id: "ctr",
			want: []viewRow{
				{Network: "net2", IfName: "eth0", Cached: true, Recorded: true},
				{Network: "net", IfName: "eth1", Cached: true, Recorded: true},
			},
		},
		{
			name: "entry removed by hand: only recorded",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.setUp(t, "ctr", "net")
				require.NoError(t, os.Remove(filepath.Join(e.cacheDir, "results", "net-ctr-eth0")))
			},
			id:   "ctr",
			want: []viewRow{{Network: "net", IfName: "eth0", Recorded: true}},
		},
		{
			name: "failed DEL: pending",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.setUp(t, "ctr", "net")
				e.fx.Fail("net", "DEL", &types.Error{Code: 11, Msg: "busy"})
				require.Error(t, e.m.TearDownPodWithContext(context.Background(), PodNetwork{ID: "ctr", NetNS: e.nsPath}))
			},
			id:   "ctr",
			want: []viewRow{{Network: "net", IfName: "eth0", Cached: true, Recorded: true, Pending: 1}},
		},
		{
			name: "corrupt entry of a recorded attachment",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.setUp(t, "ctr", "net")
				e.write(t, "results/net-ctr-eth0", "{")
			},
			id:         "ctr",
			want:       []viewRow{{Network: "net", IfName: "eth0", Corrupt: true, Recorded: true}},
			wantListed: []viewRow{{Network: "net", IfName: "eth0", Corrupt: true, Guessed: true, Recorded: true}},
		},
		{
			name: "corrupt entry of a network not loaded, not recorded",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.write(t, "results/gone-ctr-eth0", "{")
			},
			id:   "ctr",
			want: []viewRow{{Network: "gone", IfName: "eth0", Corrupt: true, Unusable: true}},
			// Nothing knows ctr, nor the network gone: no guess.
			wantListed:  []viewRow{},
			wantUnowned: 1,
		},
		{
			name: "unreadable record",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.write(t, "ocicni/attachments/ctr", "{")
			},
			id:        "ctr",
			want:      []viewRow{},
			recordErr: true,
		},
		{
			name: "unreadable record, corrupt entry",
			prepare: func(t *testing.T, e *inventoryEnv) {
				t.Helper()
				e.write(t, "ocicni/attachments/ctr", "{")
				e.write(t, "results/net-ctr-eth0", "{")
			},
			id:         "ctr",
			want:       []viewRow{{Network: "net", IfName: "eth0", Corrupt: true}},
			wantListed: []viewRow{{Network: "net", IfName: "eth0", Corrupt: true, Guessed: true}},
			recordErr:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newInventoryEnv(t)
			tc.prepare(t, e)
			calls := len(e.fx.Calls())

			sb, err := e.m.Inventory(tc.id)
			require.NoError(t, err)
			assert.Equal(t, tc.id, sb.ContainerID)
			assert.Equal(t, tc.want, rowsOf(sb), "Inventory")
			assert.Len(t, sb.Unusable, tc.wantUnusable)
			assert.Equal(t, tc.recordErr, sb.RecordErr != nil, "%v", sb.RecordErr)
			for _, a := range sb.Attachments {
				assert.Equal(t, a.Record != nil || a.Entry != nil, a.NetNS == e.nsPath, "%s: the netns stored for it", a.Name)
			}

			all, unowned, err := e.m.Inventories()
			require.NoError(t, err)
			assert.Len(t, unowned, tc.wantUnowned)
			wantListed := tc.wantListed
			if wantListed == nil {
				wantListed = tc.want
			}
			var listed *SandboxInventory
			for _, s := range all {
				if s.ContainerID == tc.id {
					listed = s
				}
			}
			if len(wantListed) == 0 && !tc.recordErr {
				assert.Nil(t, listed, "Inventories knows nothing of %s", tc.id)
			} else {
				require.NotNil(t, listed)
				assert.Equal(t, wantListed, rowsOf(listed), "Inventories")
				assert.Equal(t, tc.recordErr, listed.RecordErr != nil)
			}
			assert.Len(t, e.fx.Calls(), calls, "the view runs no plugin")
		})
	}
}

func TestInventoryPendingAndRecord(t *testing.T) {
	e := newInventoryEnv(t)
	e.setUp(t, "ctr", "net")
	e.fx.Fail("net", "DEL", &types.Error{Code: 11, Msg: "busy"})
	require.Error(t, e.m.TearDownPodWithContext(context.Background(), PodNetwork{ID: "ctr", NetNS: e.nsPath}))

	sb, err := e.m.Inventory("ctr")
	require.NoError(t, err)
	require.Len(t, sb.Attachments, 1)
	a := sb.Attachments[0]
	assert.True(t, sb.Recorded)
	assert.Equal(t, filepath.Join(e.cacheDir, "results", "net-ctr-eth0"), a.CacheFile())
	require.NotNil(t, a.Record)
	assert.NotEmpty(t, a.Record.Config, "the config saved at ADD")
	pending, err := e.m.PendingTeardowns()
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.NotNil(t, a.Pending)
	assert.Equal(t, pending[0], *a.Pending, "the same retry as PendingTeardowns")
}

func TestInventoryInvalidID(t *testing.T) {
	e := newInventoryEnv(t)
	_, err := e.m.Inventory("a/b")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A corrupt file whose content cannot tell its container gets the same
// names in the view as in GC: around the ID that another entry of the
// container gives (net-ctr2-eth1, deleted with the loaded config; and
// gone-ctr2-eth2, which no config can delete), and none at all when
// nothing is known of its name (junk). GC collects every network
// (WithGCAllNetworks), so that it acts on each of them: by default it
// leaves gone-ctr2-eth2 and junk alone, as no record or loaded network
// makes them this library's.
func TestCorruptNamesGuessedAsGCGuesses(t *testing.T) {
	e := newInventoryEnv(t, WithGCAllNetworks())
	e.setUp(t, "ctr2", "net2")
	e.write(t, "results/net-ctr2-eth1", "{")
	e.write(t, "results/gone-ctr2-eth2", "{")
	junk := e.write(t, "results/junk", "{")

	all, unowned, err := e.m.Inventories()
	require.NoError(t, err)
	require.Len(t, all, 1)
	sb := all[0]
	assert.Equal(t, "ctr2", sb.ContainerID)
	assert.Equal(t, []viewRow{
		{Network: "net2", IfName: "eth0", Cached: true, Recorded: true},
		{Network: "net", IfName: "eth1", Corrupt: true, Guessed: true},
		{Network: "gone", IfName: "eth2", Corrupt: true, Guessed: true, Unusable: true},
	}, rowsOf(sb))
	require.Len(t, unowned, 1)
	assert.Equal(t, junk, unowned[0].Path)
	assert.Empty(t, unowned[0].Network)

	type names struct{ id, network, ifname string }
	viewed := map[string]names{}
	for _, a := range sb.Attachments {
		if a.Corrupt != nil {
			viewed[filepath.Base(a.Corrupt.Path)] = names{sb.ContainerID, a.Name, a.Ifname}
		}
	}
	viewed["junk"] = names{unowned[0].ContainerID, unowned[0].Network, unowned[0].IfName}

	outcomes, err := e.m.GCOutcomes(context.Background(), nil)
	require.Error(t, err, "gone-ctr2-eth2 and junk cannot be deleted")
	collected := map[string]names{}
	for _, o := range outcomes {
		var ee *cache.EntryError
		if o.Err != nil && errors.As(o.Err, &ee) {
			collected[filepath.Base(ee.Path)] = names{o.ContainerID, o.Network, o.IfName}
		}
	}
	dels := e.fx.Calls("DEL")
	for _, c := range dels {
		if c.Network == "net" {
			collected["net-ctr2-eth1"] = names{c.ContainerID, c.Network, c.IfName}
		}
	}
	assert.Equal(t, viewed, collected, "GC acts on the names the view shows")
	assert.NoFileExists(t, filepath.Join(e.cacheDir, "results", "net-ctr2-eth1"), "deleted with the loaded config")
	assert.FileExists(t, filepath.Join(e.cacheDir, "results", "gone-ctr2-eth2"))
}

// guessCorrupt's sources of names, which GC and the view share.
func TestGuessCorrupt(t *testing.T) {
	set := netconf.NewSet("", "", &network{Name: "loaded"})
	listing := cache.Listing{Entries: []*cache.Entry{{Network: "entnet", ContainerID: "ent", IfName: "eth0"}}}
	recs := &records{IDs: []string{"bad", "rec"}} // "bad": an unreadable record
	for _, tc := range []struct {
		file  string
		extra []string
		want  [3]string // network, container, ifname; none when not guessed
	}{
		{file: "n-rec-eth0", want: [3]string{"n", "rec", "eth0"}},
		{file: "n-bad-eth0", want: [3]string{"n", "bad", "eth0"}},
		{file: "n-ent-eth0", want: [3]string{"n", "ent", "eth0"}},
		{file: "n-valid-eth0", extra: []string{"valid"}, want: [3]string{"n", "valid", "eth0"}},
		{file: "n-valid-eth0"},
		{file: "loaded-x-y-eth1", want: [3]string{"loaded", "x-y", "eth1"}},
		{file: "entnet-z-eth1", want: [3]string{"entnet", "z", "eth1"}},
		{file: "other-z-eth1"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			named := &cache.EntryError{Path: "/r/loaded-rec-eth9", Network: "loaded", ContainerID: "rec", IfName: "eth9"}
			l := listing
			l.Corrupt = []*cache.EntryError{named, {Path: "/r/" + tc.file}}
			out := guessCorrupt(l, recs, set, tc.extra...)
			require.Len(t, out, 2)
			assert.Same(t, named, out[0], "a file its content names is kept")
			got := [3]string{out[1].Network, out[1].ContainerID, out[1].IfName}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want != [3]string{}, out[1] != l.Corrupt[1], "a guess is a copy")
		})
	}
}
