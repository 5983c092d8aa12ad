package ledger

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// writeEntry writes a libcni cache entry of (network, id, ifname), as
// libcni writes one, and returns its path.
func writeEntry(t *testing.T, l *Ledger, network, id, ifname string) string {
	t.Helper()
	conf := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"fake"}]}`, network)))
	path, err := l.EntryPath(network, id, ifname)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil,
		`{"kind":"cniCacheV1","containerId":%q,"config":%q,"ifName":%q,"networkName":%q,"netns":"/var/run/netns/x","result":{"cniVersion":"1.0.0"}}`,
		id, conf, ifname, network), 0o600))
	return path
}

// Read and ReadNamed return what the ledger holds of a sandbox: its
// record, its readable entries and its corrupt files, and nothing of
// another sandbox's.
func TestReadSandbox(t *testing.T) {
	l := New(t.TempDir())
	writeEntry(t, l, "net1", "sb", "eth0")
	writeEntry(t, l, "net1", "other", "eth0")
	bad, err := l.EntryPath("net2", "sb", "eth1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o600))
	record := []cache.Attachment{{Network: "net1", IfName: "eth0", NetNS: "/var/run/netns/x"}}
	_, err = l.Commit("sb", Change{Next: record})
	require.NoError(t, err)

	sb := l.Read("sb")
	require.NoError(t, sb.RecordErr)
	require.NoError(t, sb.ListErr)
	assert.Equal(t, record, sb.Record)
	require.Len(t, sb.Entries, 1)
	assert.Equal(t, "net1", sb.Entries[0].Network)
	require.Len(t, sb.Corrupt, 1)
	assert.Equal(t, bad, sb.Corrupt[0].Path)

	got, named := l.ReadNamed("sb", [][2]string{{"net1", "eth0"}, {"net2", "eth1"}, {"net3", "eth2"}})
	assert.Equal(t, record, got.Record)
	require.Len(t, named, 3)
	assert.NotNil(t, named[0].Entry, "a readable entry")
	assert.NotNil(t, named[1].Corrupt, "a corrupt file")
	assert.Equal(t, Named{}, named[2], "no file")

	has, err := l.HasFiles("sb")
	require.NoError(t, err)
	assert.True(t, has)
	empty := l.Read("none")
	assert.Nil(t, empty.Record)
	assert.Empty(t, empty.Entries)
}

// Commit writes the next record in place of the old one and releases
// the saved configs only the old one linked; an empty next removes the
// record. Restore puts one back without releasing anything.
func TestCommitReleasesUnusedConfigs(t *testing.T) {
	l := New(t.TempDir())
	s1, err := l.SaveConfig("sb", []byte(`{"name":"a"}`))
	require.NoError(t, err)
	s2, err := l.SaveConfig("sb", []byte(`{"name":"b"}`))
	require.NoError(t, err)
	d1, d2 := s1.Digest, s2.Digest
	both := []cache.Attachment{{Network: "a", IfName: "eth0", Config: d1}, {Network: "b", IfName: "eth1", Config: d2}}
	_, err = l.Commit("sb", Change{Next: both})
	require.NoError(t, err)

	one := both[1:]
	released, err := l.Commit("sb", Change{Old: both, Next: one})
	require.NoError(t, err)
	require.NoError(t, released)
	recs, err := l.ScanRecords()
	require.NoError(t, err)
	var links []string
	for _, sc := range recs.Saved {
		if sc.ContainerID == "sb" {
			links = append(links, sc.Digest)
		}
	}
	assert.Equal(t, []string{d2}, links, "the link to the config only the old record used is released")
	b, err := l.ReadConfig("sb", d2)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"b"}`, string(b))
	rec, err := l.ReadRecord("sb")
	require.NoError(t, err)
	assert.Equal(t, one, rec)

	_, err = l.Commit("sb", Change{Old: one})
	require.NoError(t, err)
	rec, err = l.ReadRecord("sb")
	require.NoError(t, err)
	assert.Nil(t, rec, "an empty next removes the record")

	require.NoError(t, l.Restore("sb", both))
	rec, err = l.ReadRecord("sb")
	require.NoError(t, err)
	assert.Equal(t, both, rec)
}

// Commit drops entries, by their names or by their path, with the
// record it writes, or alone (Keep); Scan reads the node's entries and
// records once.
func TestCommitDropsEntries(t *testing.T) {
	l := New(t.TempDir())
	byNames := writeEntry(t, l, "net1", "a", "eth0")
	byPath := writeEntry(t, l, "net1", "a", "eth1")
	other := writeEntry(t, l, "net1", "b", "eth0")
	rec := []cache.Attachment{{Network: "net1", IfName: "eth0"}, {Network: "net1", IfName: "eth1"}}
	_, err := l.Commit("a", Change{Next: rec})
	require.NoError(t, err)

	node, errs := l.Scan()
	require.Empty(t, errs)
	assert.Len(t, node.Listing.Entries, 3)
	assert.Equal(t, []string{"a"}, node.Records.IDs)

	leftover, err := l.Commit("a", Change{Old: rec, Drop: []Entry{{Network: "net1", IfName: "eth0"}, {Path: byPath}, {Network: "net9", IfName: "eth9"}}})
	require.NoError(t, err, "an absent entry is no error")
	require.NoError(t, leftover)
	for _, p := range []string{byNames, byPath} {
		assert.NoFileExists(t, p)
	}
	got, err := l.ReadRecord("a")
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.NoDirExists(t, l.asideDir("a"), "nothing is left aside")

	_, err = l.Commit("b", Change{Keep: true, Drop: []Entry{{Path: other}}})
	require.NoError(t, err)
	assert.NoFileExists(t, other)

	_, err = l.Commit("b", Change{Keep: true, Drop: []Entry{{Path: filepath.Join(l.Dir(), "elsewhere")}}})
	require.ErrorIs(t, err, cache.ErrOutsideResults)
}

// A Commit whose record cannot be written leaves the record and the
// entries as they were.
func TestCommitFailureLeavesEverything(t *testing.T) {
	l := New(t.TempDir())
	entry := writeEntry(t, l, "net1", "a", "eth0")
	rec := []cache.Attachment{{Network: "net1", IfName: "eth0"}}
	_, err := l.Commit("a", Change{Next: rec})
	require.NoError(t, err)

	bad := []cache.Attachment{{Network: "net1", IfName: "bad/name"}}
	_, err = l.Commit("a", Change{Old: rec, Next: bad, Drop: []Entry{{Network: "net1", IfName: "eth0"}}})
	require.Error(t, err)
	assert.FileExists(t, entry, "the entry is put back")
	got, err := l.ReadRecord("a")
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	assert.NoDirExists(t, l.asideDir("a"))
}

// A commit that a crash cut short is finished under the sandbox's lock
// when its record is on disk, and undone when it is not.
func TestCommitCutShortIsRecovered(t *testing.T) {
	ctx := context.Background()
	rec := []cache.Attachment{{Network: "net1", IfName: "eth0"}}
	for _, tc := range []struct {
		name        string
		wroteRecord bool
		want        bool // the entry is there after recovery
	}{
		{"record written", true, false},
		{"record not written", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(t.TempDir())
			entry := writeEntry(t, l, "net1", "a", "eth0")
			_, err := l.Commit("a", Change{Next: rec})
			require.NoError(t, err)
			ch := Change{Old: rec, Drop: []Entry{{Network: "net1", IfName: "eth0"}}}
			_, err = l.setAside("a", ch) // the crash comes after this step, or after the next
			require.NoError(t, err)
			assert.NoFileExists(t, entry)
			if tc.wroteRecord {
				require.NoError(t, l.Restore("a", ch.Next))
			}

			held, err := New(l.Dir()).LockSandbox(ctx, "a", false)
			require.NoError(t, err)
			held.Release()
			assert.NoDirExists(t, l.asideDir("a"))
			if tc.want {
				assert.FileExists(t, entry, "the commit is undone: its entry is back")
			} else {
				assert.NoFileExists(t, entry, "the commit is finished")
			}
		})
	}
}

// Recover recovers the commits of sandboxes nobody holds, and
// leaves a held one to its holder.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	l := New(t.TempDir())
	rec := []cache.Attachment{{Network: "net1", IfName: "eth0"}}
	entries := map[string]string{}
	for _, id := range []string{"free", "held"} {
		entries[id] = writeEntry(t, l, "net1", id, "eth0")
		_, err := l.Commit(id, Change{Next: rec})
		require.NoError(t, err)
		_, err = l.setAside(id, Change{Old: rec, Drop: []Entry{{Network: "net1", IfName: "eth0"}}})
		require.NoError(t, err)
	}
	other := New(l.Dir())
	held, err := other.locks.Lock(ctx, "held") // held without recovering, as a holder mid-commit
	require.NoError(t, err)

	_, err = l.Recover()
	require.NoError(t, err)
	assert.FileExists(t, entries["free"])
	assert.NoDirExists(t, l.asideDir("free"))
	assert.DirExists(t, l.asideDir("held"), "its holder's to finish")
	held.Unlock(false)
	_, err = l.Recover()
	require.NoError(t, err)
	assert.FileExists(t, entries["held"])
}

// A sandbox's lock file is stamped by its releases while the sandbox has
// a record, and goes with the record; TryLock-style locking sees another
// holder as busy.
func TestSandboxLockFollowsTheRecord(t *testing.T) {
	dir := t.TempDir()
	a, b := New(dir), New(dir)
	ctx := context.Background()
	lockFile := filepath.Join(dir, "ocicni", "locks", "sb")

	held, err := a.LockSandbox(ctx, "sb", false)
	require.NoError(t, err)
	_, err = b.LockSandbox(ctx, "sb", true)
	require.ErrorIs(t, err, locks.ErrBusy, "another ledger's holder is busy")
	_, err = a.Commit("sb", Change{Next: []cache.Attachment{{Network: "n", IfName: "eth0"}}})
	require.NoError(t, err)
	held.Release()
	assert.FileExists(t, lockFile, "a sandbox with a record keeps its lock file")

	held, err = b.LockSandbox(ctx, "sb", true)
	require.NoError(t, err)
	assert.Equal(t, a.Owner(), held.LastRelease().Owner, "the last release is stamped with its owner")
	_, err = b.Commit("sb", Change{Old: []cache.Attachment{{Network: "n", IfName: "eth0"}}})
	require.NoError(t, err)
	held.Release()
	assert.NoFileExists(t, lockFile, "the lock file goes with the record")

	recent, err := a.RecentWork(time.Time{})
	require.NoError(t, err)
	assert.Empty(t, recent)
	a.Close()
	b.Close()
}

// SweepLocks removes the lock files that a holder left without a record,
// and keeps those of recorded sandboxes and those held now.
func TestSweepLocks(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	ctx := context.Background()
	lockDir := filepath.Join(dir, "ocicni", "locks")
	require.NoError(t, os.MkdirAll(lockDir, 0o700))
	for _, id := range []string{"left", "recorded", "held"} {
		require.NoError(t, os.WriteFile(filepath.Join(lockDir, id), nil, 0o600)) // as a holder that died leaves it
	}
	_, err := l.Commit("recorded", Change{Next: []cache.Attachment{{Network: "n", IfName: "eth0"}}})
	require.NoError(t, err)
	held, err := New(dir).LockSandbox(ctx, "held", false)
	require.NoError(t, err)

	require.NoError(t, l.SweepLocks([]string{"recorded"}))
	assert.NoFileExists(t, filepath.Join(lockDir, "left"))
	assert.FileExists(t, filepath.Join(lockDir, "recorded"))
	assert.FileExists(t, filepath.Join(lockDir, "held"), "a held lock is left to its holder")
	held.Release()
	assert.NoFileExists(t, filepath.Join(lockDir, "held"), "its holder removes it: no record")
}
