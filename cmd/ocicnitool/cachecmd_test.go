package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureCache copies testdata/cache, which holds:
//   - net1-abc-eth0 and net2-abc-eth0: two networks claiming abc/eth0;
//   - net1-def-eth0: an entry without a result;
//   - net1-def-eth1: a truncated (corrupt) entry;
//   - ocicni/attachments/abc: a record of net1/eth0, net2/eth0 and
//     net3/eth1 (the last one never cached);
//   - ocicni/attachments/xyz: a corrupt record.
func fixtureCache(t *testing.T) string {
	t.Helper()
	return copyDir(t, filepath.Join("testdata", "cache"))
}

func byFile(entries []entryJSON) map[string]entryJSON {
	m := map[string]entryJSON{}
	for _, e := range entries {
		m[filepath.Base(e.File)] = e
	}
	return m
}

func TestCacheLsMarksDuplicatesAndCorruptEntries(t *testing.T) {
	dir := fixtureCache(t)
	r := mustRun(t, exitOK, "cache", "ls", "--json", "--cache-dir", dir)
	doc := decode[cacheLsJSON](t, r)
	assert.Equal(t, dir, doc.CacheDir)

	entries := byFile(doc.Entries)
	require.Len(t, entries, 4, "%s", r)
	for _, f := range []string{"net1-abc-eth0", "net2-abc-eth0"} {
		e := entries[f]
		assert.True(t, e.Duplicate, "%s: abc/eth0 is claimed by net1 and net2", f)
		assert.False(t, e.Corrupt, f)
		assert.Equal(t, "abc", e.Container)
		assert.Equal(t, "eth0", e.IfName)
		assert.Equal(t, "/var/run/netns/abc", e.NetNS)
		assert.Equal(t, filepath.Join(dir, "results", f), e.File)
	}
	assert.Equal(t, []string{"10.1.0.5/24"}, entries["net1-abc-eth0"].IPs)
	assert.Equal(t, []string{"10.2.0.5/24"}, entries["net2-abc-eth0"].IPs)

	noResult := entries["net1-def-eth0"]
	assert.False(t, noResult.Duplicate)
	assert.False(t, noResult.Corrupt)
	assert.Empty(t, noResult.IPs)

	bad := entries["net1-def-eth1"]
	assert.True(t, bad.Corrupt)
	assert.Contains(t, bad.Reason, "corrupt entry")
	assert.Contains(t, bad.Reason, "unexpected end of JSON input")
	assert.True(t, bad.NamesGuessed, "split around the known container def")
	assert.Equal(t, "net1", bad.Network)
	assert.Equal(t, "def", bad.Container)
	assert.Equal(t, "eth1", bad.IfName)

	require.Len(t, doc.Records, 2)
	abc, xyz := doc.Records[0], doc.Records[1]
	assert.Equal(t, "abc", abc.Container)
	assert.Equal(t, []recordedJSON{
		{Network: "net1", IfName: "eth0", NetNS: "/var/run/netns/abc", Cached: true},
		{Network: "net2", IfName: "eth0", NetNS: "/var/run/netns/abc", Cached: true},
		{Network: "net3", IfName: "eth1", NetNS: "/var/run/netns/abc", Cached: false},
	}, abc.Attachments)
	assert.Equal(t, "xyz", xyz.Container)
	assert.True(t, xyz.Corrupt)
	assert.NotEmpty(t, xyz.Reason)

	// The JSON names scripts rely on.
	assert.Contains(t, r.stdout, `"corrupt": true`)
	assert.Contains(t, r.stdout, `"duplicate": true`)
	assert.Contains(t, r.stdout, `"ips": [`)

	// The table shows the same marks, and the records in their own section.
	r = mustRun(t, exitOK, "cache", "ls", "--cache-dir", dir)
	assert.Regexp(t, `(?m)^net1 +def +eth1 .*net1-def-eth1 +corrupt,names-guessed +cache: corrupt entry`, r.stdout)
	assert.Regexp(t, `(?m)^net2 +abc +eth0 +/var/run/netns/abc +10\.2\.0\.5/24 +net2-abc-eth0 +ok,duplicate `, r.stdout)
	assert.Regexp(t, `(?m)^ATTACHMENT RECORDS`, r.stdout)
	assert.Regexp(t, `(?m)^abc +3 +net3 +eth1 +/var/run/netns/abc +no +ok$`, r.stdout)
	assert.Regexp(t, `(?m)^xyz .*corrupt: `, r.stdout)
}

func TestCacheLsFilters(t *testing.T) {
	dir := fixtureCache(t)
	for _, tc := range []struct {
		name        string
		args        []string
		wantCode    int
		wantFiles   []string
		wantRecords map[string]int // container -> attachments shown
	}{
		{
			name: "container", args: []string{"--container", "abc"},
			wantFiles: []string{"net1-abc-eth0", "net2-abc-eth0"}, wantRecords: map[string]int{"abc": 3},
		},
		{
			name: "container with a corrupt entry", args: []string{"--container", "def"},
			wantFiles: []string{"net1-def-eth0", "net1-def-eth1"}, wantRecords: map[string]int{},
		},
		{
			name: "network", args: []string{"--network", "net2"},
			wantFiles: []string{"net2-abc-eth0"}, wantRecords: map[string]int{"abc": 1},
		},
		{
			name: "network only recorded", args: []string{"--network", "net3"},
			wantFiles: []string{}, wantRecords: map[string]int{"abc": 1},
		},
		{
			name: "container and network", args: []string{"--container", "def", "--network", "net1"},
			wantFiles: []string{"net1-def-eth0", "net1-def-eth1"}, wantRecords: map[string]int{},
		},
		{
			name: "networks as a list", args: []string{"--network", "net2,net3"},
			wantFiles: []string{"net2-abc-eth0"}, wantRecords: map[string]int{"abc": 2},
		},
		{name: "unknown container", args: []string{"--container", "nope"}, wantCode: exitNotFound},
		{name: "unknown network", args: []string{"--network", "nope"}, wantCode: exitNotFound},
		{name: "invalid container", args: []string{"--container", "a/b"}, wantCode: exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRun(t, tc.wantCode, append([]string{"cache", "ls", "--json", "--cache-dir", dir}, tc.args...)...)
			if tc.wantCode == exitUsage {
				return
			}
			doc := decode[cacheLsJSON](t, r)
			if tc.wantCode == exitNotFound {
				assert.Empty(t, doc.Entries)
				assert.Empty(t, doc.Records)
				assert.Contains(t, r.stderr, "no cache entry or attachment record matches")
				return
			}
			files := []string{}
			for _, e := range doc.Entries {
				files = append(files, filepath.Base(e.File))
			}
			assert.Equal(t, tc.wantFiles, files)
			records := map[string]int{}
			for _, rec := range doc.Records {
				records[rec.Container] = len(rec.Attachments)
			}
			assert.Equal(t, tc.wantRecords, records)
		})
	}
}

// TestCacheLsEmpty checks that an empty or missing cache dir is no error.
func TestCacheLsEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	doc := decode[cacheLsJSON](t, mustRun(t, exitOK, "cache", "ls", "--json", "--cache-dir", dir))
	assert.Empty(t, doc.Entries)
	assert.Empty(t, doc.Records)
	assert.Contains(t, mustRun(t, exitOK, "cache", "ls", "--cache-dir", dir).stdout, "NETWORK")
}

// TestCacheRmKeepsTheRecord runs cache rm on the fixture, without root
// and without configs: ForgetPodCache runs no plugin.
func TestCacheRmKeepsTheRecord(t *testing.T) {
	dir := fixtureCache(t)
	dirs := []string{"--cache-dir", dir, "--conf-dir", t.TempDir(), "--bin-dir", t.TempDir()}

	r := mustRun(t, exitOK, append([]string{"cache", "rm", "--json", "--container", "def", "--netns", "pod-def"}, dirs...)...)
	doc := decode[cacheRmJSON](t, r)
	assert.Equal(t, "def", doc.Container)
	assert.ElementsMatch(t, []string{
		filepath.Join(dir, "results", "net1-def-eth0"),
		filepath.Join(dir, "results", "net1-def-eth1"),
	}, doc.Removed)
	assert.ElementsMatch(t, []recordedJSON{
		{Network: "net1", IfName: "eth0", NetNS: "/var/run/netns/def"}, // from the entry
		{Network: "net1", IfName: "eth1", NetNS: "/run/netns/pod-def"}, // corrupt: --netns
	}, doc.Record)
	for _, f := range doc.Removed {
		assert.NoFileExists(t, f)
	}
	assert.FileExists(t, filepath.Join(dir, "results", "net1-abc-eth0"), "other containers keep theirs")

	// The entries are gone, the record stays, so the container is still
	// known and gc can find its attachments.
	ls := decode[cacheLsJSON](t, mustRun(t, exitOK, "cache", "ls", "--json", "--cache-dir", dir, "--container", "def"))
	assert.Empty(t, ls.Entries)
	require.Len(t, ls.Records, 1)
	assert.Len(t, ls.Records[0].Attachments, 2)
	for _, a := range ls.Records[0].Attachments {
		assert.False(t, a.Cached)
	}

	r = mustRun(t, exitNotFound, append([]string{"cache", "rm", "--container", "def"}, dirs...)...)
	assert.Contains(t, r.stderr, "container def has no cache entry")
	_, err := os.Stat(filepath.Join(dir, "ocicni", "attachments", "def"))
	assert.NoError(t, err, "a second rm leaves the record alone")
}

// TestGlobalFlagsAnywhere checks that global flags may come before the
// command, and that a command takes the global flags it does not use,
// as --help's "Global flags" promises: each line lists the fixture's four
// entries.
func TestGlobalFlagsAnywhere(t *testing.T) {
	dir := fixtureCache(t)
	conf := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"after the command", []string{"cache", "ls", "--json", "--cache-dir", dir}},
		{"before the command", []string{"--cache-dir", dir, "--json", "cache", "ls"}},
		{"before, with =", []string{"--cache-dir=" + dir, "-json", "cache", "ls"}},
		{"split around it", []string{"--cache-dir", dir, "cache", "ls", "--json"}},
		{"a dir flag the command does not use", []string{"cache", "ls", "--json", "--cache-dir", dir, "--conf-dir", conf, "--bin-dir", conf}},
		{"the same before it", []string{"--conf-dir", conf, "--timeout", "5s", "--debug", "cache", "ls", "--json", "--cache-dir", dir}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := decode[cacheLsJSON](t, mustRun(t, exitOK, tc.args...))
			assert.Equal(t, dir, doc.CacheDir)
			assert.Len(t, doc.Entries, 4)
		})
	}
	// Only global flags may come first; a command's own flag there is an
	// unknown command, and a flag no command has is refused after it.
	r := mustRun(t, exitUsage, "--container", "abc", "cache", "ls")
	assert.Contains(t, r.stderr, `unknown command "--container"`)
	r = mustRun(t, exitUsage, "cache", "ls", "--bogus", "--cache-dir", dir)
	assert.Contains(t, r.stderr, "flag provided but not defined: -bogus")
}
