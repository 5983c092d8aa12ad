package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

func ptr[T any](v T) *T { return &v }

func TestPendingStats(t *testing.T) {
	retry := func(since, next time.Time) ocicni.PendingTeardown {
		return ocicni.PendingTeardown{ContainerID: "c", Network: "n", IfName: "eth0", Attempts: 1, Since: since, NextAttempt: next}
	}
	gaveUp := func(since time.Time) ocicni.PendingTeardown {
		return ocicni.PendingTeardown{ContainerID: "c", Network: "n", IfName: "eth1", Attempts: 30, Since: since, GaveUp: true}
	}
	for _, tc := range []struct {
		name    string
		pending []ocicni.PendingTeardown
		want    pendingStatsJSON
	}{
		{name: "none", want: pendingStatsJSON{}},
		{
			name:    "a retry due exactly now",
			pending: []ocicni.PendingTeardown{retry(ago(time.Minute), statsNow)},
			want: pendingStatsJSON{
				Total: 1, DueNow: 1,
				OldestSince: ptr(ago(time.Minute)), OldestAgeSeconds: 60, NextAttempt: ptr(statsNow),
			},
		},
		{
			name:    "a retry not due yet",
			pending: []ocicni.PendingTeardown{retry(ago(time.Second), statsNow.Add(time.Second))},
			want: pendingStatsJSON{
				Total: 1, OldestSince: ptr(ago(time.Second)), OldestAgeSeconds: 1, NextAttempt: ptr(statsNow.Add(time.Second)),
			},
		},
		{
			name:    "given up only: no next retry, still the oldest",
			pending: []ocicni.PendingTeardown{gaveUp(ago(25 * time.Hour))},
			want:    pendingStatsJSON{Total: 1, GaveUp: 1, OldestSince: ptr(ago(25 * time.Hour)), OldestAgeSeconds: 25 * 3600},
		},
		{
			name: "mixed: the earliest first failure and the earliest retry",
			pending: []ocicni.PendingTeardown{
				retry(ago(2*time.Minute), ago(time.Second)),
				retry(ago(10*time.Minute), statsNow.Add(time.Minute)),
				gaveUp(ago(30 * time.Hour)),
				retry(ago(time.Minute), statsNow.Add(10*time.Second)),
			},
			want: pendingStatsJSON{
				Total: 4, GaveUp: 1, DueNow: 1,
				OldestSince: ptr(ago(30 * time.Hour)), OldestAgeSeconds: 30 * 3600, NextAttempt: ptr(ago(time.Second)),
			},
		},
		{
			name:    "a first failure after now counts no age",
			pending: []ocicni.PendingTeardown{retry(statsNow.Add(time.Hour), statsNow.Add(2*time.Hour))},
			want: pendingStatsJSON{
				Total: 1, OldestSince: ptr(statsNow.Add(time.Hour)), NextAttempt: ptr(statsNow.Add(2 * time.Hour)),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pendingStats(tc.pending, statsNow))
		})
	}
}

// att builds an inventory attachment of network name on ifname, with the
// cache entry of container id when cached, and a record line.
func att(id, name, ifname string, cached bool, pending *ocicni.PendingTeardown) ocicni.InventoryAttachment {
	a := ocicni.InventoryAttachment{
		NetAttachment: ocicni.NetAttachment{Name: name, Ifname: ifname},
		Record:        &cache.Attachment{Network: name, IfName: ifname},
		Pending:       pending,
	}
	if cached {
		a.Entry = &cache.Entry{
			Path: filepath.Join("/cache/results", name+"-"+id+"-"+ifname), ContainerID: id, Network: name, IfName: ifname,
		}
	}
	return a
}

func corruptFile(id, name, ifname string) *cache.EntryError {
	return &cache.EntryError{
		Path: filepath.Join("/cache/results", name+"-"+id+"-"+ifname), ContainerID: id, Network: name, IfName: ifname,
		Err: fmt.Errorf("%w: unexpected end of JSON input", cache.ErrCorruptEntry),
	}
}

func TestNodeStats(t *testing.T) {
	due := &ocicni.PendingTeardown{ContainerID: "a", Network: "net2", IfName: "net1", Attempts: 2, Since: ago(time.Hour), NextAttempt: ago(time.Second)}
	for _, tc := range []struct {
		name    string
		invs    []*ocicni.SandboxInventory
		unowned []*cache.EntryError
		want    statsJSON
	}{
		{
			name: "empty node",
			want: statsJSON{At: statsNow, Networks: []networkStatsJSON{}},
		},
		{
			name: "cached, recorded and pending",
			invs: []*ocicni.SandboxInventory{
				{ContainerID: "a", Recorded: true, Attachments: []ocicni.InventoryAttachment{
					att("a", "net1", "eth0", true, nil),
					att("a", "net2", "net1", false, due),
				}},
				{ContainerID: "b", Attachments: []ocicni.InventoryAttachment{
					{NetAttachment: ocicni.NetAttachment{Name: "net1", Ifname: "eth0"}, Entry: att("b", "net1", "eth0", true, nil).Entry},
				}},
			},
			want: statsJSON{
				At:          statsNow,
				Sandboxes:   sandboxStatsJSON{Total: 2, Recorded: 1, Cached: 2},
				Attachments: 3,
				Networks: []networkStatsJSON{
					{Network: "net1", Attachments: 2, Cached: 2},
					{Network: "net2", Attachments: 1, Pending: 1},
				},
				Entries: entryStatsJSON{Total: 2},
				Pending: pendingStatsJSON{
					Total: 1, DueNow: 1, OldestSince: ptr(ago(time.Hour)), OldestAgeSeconds: 3600, NextAttempt: ptr(ago(time.Second)),
				},
			},
		},
		{
			name: "duplicate, corrupt, unreadable and unowned files, an unreadable record",
			invs: []*ocicni.SandboxInventory{
				{
					ContainerID: "c",
					Attachments: []ocicni.InventoryAttachment{
						att("c", "net1", "eth0", true, nil),
						att("c", "net2", "eth0", true, nil), // claims c/eth0 too
						{NetAttachment: ocicni.NetAttachment{Name: "net3", Ifname: "eth1"}, Corrupt: corruptFile("c", "net3", "eth1")},
					},
					Unusable: []*cache.EntryError{{Path: "/cache/results/c-unreadable", ContainerID: "c", Err: fs.ErrPermission}},
				},
				{ContainerID: "d", Recorded: true, RecordErr: fmt.Errorf("%w: not JSON", cache.ErrCorruptEntry)},
			},
			unowned: []*cache.EntryError{corruptFile("", "", "")},
			want: statsJSON{
				At:          statsNow,
				Sandboxes:   sandboxStatsJSON{Total: 2, Recorded: 1, Cached: 1, UnreadableRecords: 1},
				Attachments: 3,
				Networks: []networkStatsJSON{
					{Network: "net1", Attachments: 1, Cached: 1},
					{Network: "net2", Attachments: 1, Cached: 1},
					{Network: "net3", Attachments: 1, Cached: 1},
				},
				Entries: entryStatsJSON{Total: 5, Corrupt: 2, Unreadable: 1, Unowned: 1, Duplicate: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nodeStats(tc.invs, tc.unowned, statsNow))
		})
	}
}

// TestStatsFixtures runs stats on the fixture caches, through the
// library's inventory, without root: testdata/cache (see fixtureCache) and
// testdata/pending (see TestPendingAges).
func TestStatsFixtures(t *testing.T) {
	before := time.Now()
	doc := decode[statsJSON](t, mustRun(t, exitOK, "stats", "--json", "--cache-dir", fixtureCache(t)))
	assert.Nil(t, doc.Config, "no conf dir without --conf")
	assert.Equal(t, sandboxStatsJSON{Total: 3, Recorded: 2, Cached: 2, UnreadableRecords: 1}, doc.Sandboxes)
	assert.Equal(t, 5, doc.Attachments)
	assert.Equal(t, []networkStatsJSON{
		{Network: "net1", Attachments: 3, Cached: 3}, // abc/eth0, def/eth0, and the corrupt def/eth1
		{Network: "net2", Attachments: 1, Cached: 1},
		{Network: "net3", Attachments: 1}, // only recorded
	}, doc.Networks)
	assert.Equal(t, entryStatsJSON{Total: 4, Corrupt: 1, Duplicate: 2}, doc.Entries)
	assert.Equal(t, pendingStatsJSON{}, doc.Pending)

	dir := copyDir(t, filepath.Join("testdata", "pending"))
	r := mustRun(t, exitOK, "stats", "--json", "--cache-dir", dir)
	doc = decode[statsJSON](t, r)
	assert.WithinRange(t, doc.At, before, time.Now())
	assert.Equal(t, dir, doc.CacheDir)
	assert.Equal(t, sandboxStatsJSON{Total: 2, Recorded: 2, Cached: 1}, doc.Sandboxes)
	assert.Equal(t, []networkStatsJSON{
		{Network: "net1", Attachments: 1, Cached: 1, Pending: 1},
		{Network: "net2", Attachments: 2, Pending: 2},
	}, doc.Networks)
	assert.Equal(t, entryStatsJSON{Total: 1}, doc.Entries)
	oldest := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, pendingStatsJSON{
		Total: 3, GaveUp: 1, DueNow: 1,
		OldestSince: &oldest, OldestAgeSeconds: doc.At.Sub(oldest).Seconds(),
		NextAttempt: ptr(time.Date(2024, 1, 1, 0, 5, 0, 0, time.UTC)),
	}, doc.Pending)
	assert.Contains(t, r.stdout, `"dueNow": 1`, "the JSON names scripts rely on")
	assert.Contains(t, r.stdout, `"oldestAgeSeconds": `)

	r = mustRun(t, exitOK, "stats", "--cache-dir", dir)
	assert.Regexp(t, `(?m)^PENDING TEARDOWNS\nTOTAL +GAVE UP +DUE NOW +OLDEST +NEXT\n3 +1 +1 +\d+d(?:\d+h)?(?:\d+m)?(?:\d+s)? +2024-01-01T00:05:00Z$`, r.stdout)
	assert.Regexp(t, `(?m)^net2 +2 +0 +2$`, r.stdout)
	assert.NotContains(t, r.stdout, "SKIPPED CONFIG FILES", "no conf dir without --conf")
}

// TestStatsConf checks the conf dir's view that --conf adds, and that
// --conf-dir implies it: the networks loaded, the default one and the
// files skipped with their reason. The files give no default network,
// which is "not found" (see TestStatsConfNoDefaultNetwork).
func TestStatsConf(t *testing.T) {
	confDir, binDir := t.TempDir(), t.TempDir()
	testenv.WriteFile(t, confDir, "10-bad.conflist", `{"cniVersion": "1.0.0", "name": "bad", "plugins": [`)
	testenv.WriteFile(t, confDir, "20-nobin.conflist", `{"cniVersion": "1.0.0", "name": "nobin", "plugins": [{"type": "no-such-plugin"}]}`)
	for _, args := range [][]string{
		{"--conf", "--conf-dir", confDir, "--bin-dir", binDir},
		{"--conf-dir", confDir, "--bin-dir", binDir},
	} {
		doc := decode[statsJSON](t, mustRun(t, exitNotFound, append([]string{"stats", "--json", "--cache-dir", fixtureCache(t)}, args...)...))
		require.NotNil(t, doc.Config, "%v", args)
		assert.Equal(t, confDir, doc.Config.ConfDir)
		assert.Empty(t, doc.Config.Default)
		assert.Empty(t, doc.Config.Networks)
		require.Len(t, doc.Config.Skipped, 2)
		assert.Equal(t, filepath.Join(confDir, "10-bad.conflist"), doc.Config.Skipped[0].File)
		assert.NotEmpty(t, doc.Config.Skipped[0].Reason)
		assert.Equal(t, "nobin", doc.Config.Skipped[1].Network)
		assert.Contains(t, doc.Config.Skipped[1].Reason, "no-such-plugin")
		assert.Equal(t, 3, doc.Sandboxes.Total, "the cache figures are there too")
	}
	r := mustRun(t, exitNotFound, "stats", "--cache-dir", fixtureCache(t), "--conf-dir", confDir, "--bin-dir", binDir)
	assert.Regexp(t, `(?m)^SKIPPED CONFIG FILES\nFILE +NETWORK +REASON\n\S+/10-bad\.conflist +- +`, r.stdout)
}

// TestStatsConfNoDefaultNetwork checks that stats, when it loads the conf
// dir (--conf, or implied by --conf-dir), says that no default network is
// loaded and exits 2 (not found), as status does, after printing the
// figures; and that without --conf nothing is said of networks.
func TestStatsConfNoDefaultNetwork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		flags  []string
		reason string // the reason the error gives, after the conf dir
	}{
		{name: "empty conf dir", flags: []string{"--conf"}},
		{name: "empty conf dir, --conf implied", flags: []string{}},
		{
			name:   "every file skipped",
			files:  map[string]string{"10-bad.conflist": `{"cniVersion": "1.0.0", "name": "bad", "plugins": [`},
			flags:  []string{"--conf"},
			reason: " (1 config file skipped, listed with the reason)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			confDir := t.TempDir()
			for name, data := range tc.files {
				testenv.WriteFile(t, confDir, name, data)
			}
			args := append([]string{"stats", "--cache-dir", fixtureCache(t), "--conf-dir", confDir, "--bin-dir", t.TempDir()}, tc.flags...)
			wantErr := progName + " stats: ocicni: no default network: no valid CNI configuration in " + confDir + tc.reason + "\n"

			r := mustRun(t, exitNotFound, args...)
			assert.Equal(t, wantErr, r.stderr)
			assert.Regexp(t, `(?m)^NETWORKS LOADED FROM `+regexp.QuoteMeta(confDir)+`\nNETWORK +DEFAULT\n\(none\)$`, r.stdout)
			assert.Regexp(t, `(?m)^SANDBOXES `, r.stdout, "the figures come first")

			r = mustRun(t, exitNotFound, append(args, "--json")...)
			assert.Equal(t, wantErr, r.stderr)
			doc := decode[statsJSON](t, r)
			require.NotNil(t, doc.Config)
			assert.Empty(t, doc.Config.Default)
			assert.Equal(t, 3, doc.Sandboxes.Total, "the figures are there")
		})
	}

	// Without the conf dir, stats says nothing of networks.
	r := mustRun(t, exitOK, "stats", "--cache-dir", fixtureCache(t))
	assert.Empty(t, r.stderr)
}
