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
	_, err = l.Commit("sb", nil, record)
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
	d1, err := l.SaveConfig("sb", []byte(`{"name":"a"}`))
	require.NoError(t, err)
	d2, err := l.SaveConfig("sb", []byte(`{"name":"b"}`))
	require.NoError(t, err)
	both := []cache.Attachment{{Network: "a", IfName: "eth0", Config: d1}, {Network: "b", IfName: "eth1", Config: d2}}
	_, err = l.Commit("sb", nil, both)
	require.NoError(t, err)

	one := both[1:]
	released, err := l.Commit("sb", both, one)
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

	_, err = l.Commit("sb", one, nil)
	require.NoError(t, err)
	rec, err = l.ReadRecord("sb")
	require.NoError(t, err)
	assert.Nil(t, rec, "an empty next removes the record")

	require.NoError(t, l.Restore("sb", both))
	rec, err = l.ReadRecord("sb")
	require.NoError(t, err)
	assert.Equal(t, both, rec)
}

// DropEntry removes an entry by its names or by its path; Scan reads the
// node's entries and records once.
func TestDropEntryAndScan(t *testing.T) {
	l := New(t.TempDir())
	byNames := writeEntry(t, l, "net1", "a", "eth0")
	byPath := writeEntry(t, l, "net1", "b", "eth0")
	_, err := l.Commit("a", nil, []cache.Attachment{{Network: "net1", IfName: "eth0"}})
	require.NoError(t, err)

	node, errs := l.Scan()
	require.Empty(t, errs)
	assert.Len(t, node.Listing.Entries, 2)
	assert.Equal(t, []string{"a"}, node.Records.IDs)

	require.NoError(t, l.DropEntry("net1", "a", "eth0", ""))
	require.NoError(t, l.DropEntry("", "", "", byPath))
	for _, p := range []string{byNames, byPath} {
		ok, err := l.EntryExists(p)
		require.NoError(t, err)
		assert.False(t, ok, p)
	}
	require.NoError(t, l.DropEntry("net1", "a", "eth0", ""), "an absent entry is no error")
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
	_, err = a.Commit("sb", nil, []cache.Attachment{{Network: "n", IfName: "eth0"}})
	require.NoError(t, err)
	held.Release()
	assert.FileExists(t, lockFile, "a sandbox with a record keeps its lock file")

	held, err = b.LockSandbox(ctx, "sb", true)
	require.NoError(t, err)
	assert.Equal(t, a.Owner(), held.LastRelease().Owner, "the last release is stamped with its owner")
	_, err = b.Commit("sb", []cache.Attachment{{Network: "n", IfName: "eth0"}}, nil)
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
	_, err := l.Commit("recorded", nil, []cache.Attachment{{Network: "n", IfName: "eth0"}})
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
