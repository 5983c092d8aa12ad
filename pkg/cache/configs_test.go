package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateDigest(t *testing.T) {
	good := ConfigDigest([]byte("x"))
	for name, tc := range map[string]struct {
		d  string
		ok bool
	}{
		"made by ConfigDigest": {good, true},
		"empty":                {"", false},
		"no algorithm":         {strings.TrimPrefix(good, "sha256:"), false},
		"other algorithm":      {"md5:" + strings.TrimPrefix(good, "sha256:"), false},
		"short":                {good[:len(good)-1], false},
		"upper case":           {"sha256:" + strings.ToUpper(strings.TrimPrefix(good, "sha256:")), false},
		"path":                 {"sha256:../../../../etc/passwd" + strings.Repeat("0", 44), false},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateDigest(tc.d)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidName)
		})
	}
}

// Saved configs are content-addressed: one private copy per distinct
// config, linked from each record that uses it, checked against its
// digest when read back, and gone with the last record that uses it.
func TestSaveConfig(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	conf := []byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"}]}`)
	digest, err := c.SaveConfig("pod1", conf)
	require.NoError(t, err)
	assert.Equal(t, ConfigDigest(conf), digest)
	again, err := c.SaveConfig("pod2", conf)
	require.NoError(t, err)
	assert.Equal(t, digest, again)
	for _, id := range []string{"pod1", "pod2"} {
		got, err := c.ReadConfig(id, digest)
		require.NoError(t, err)
		assert.Equal(t, conf, got)
	}

	shared := filepath.Join(c.ConfigsDir(), strings.TrimPrefix(digest, "sha256:"))
	link1 := filepath.Join(c.OrdersDir(), ".cfg.pod1."+strings.TrimPrefix(digest, "sha256:"))
	assertPrivate(t, c, shared)
	assertPrivate(t, c, link1)
	list, err := c.ListConfigs()
	require.NoError(t, err)
	require.Len(t, list, 3, "one shared copy and two links")
	assert.Equal(t, SavedConfig{Digest: digest, Path: shared, Links: 3, Changed: list[0].Changed}, list[0])
	assert.Equal(t, "pod1", list[1].ContainerID)
	assert.Equal(t, "pod2", list[2].ContainerID)
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Empty(t, ids, "links are not records")

	// The shared copy may go (a GC on another node's copy of the dir, a
	// hand edit): each record keeps its link.
	require.NoError(t, os.Remove(shared))
	got, err := c.ReadConfig("pod1", digest)
	require.NoError(t, err)
	assert.Equal(t, conf, got)

	// A link whose content no longer matches its name is corrupt.
	require.NoError(t, os.Remove(link1))
	require.NoError(t, os.WriteFile(link1, []byte("{}"), 0o600))
	_, err = c.ReadConfig("pod1", digest)
	require.ErrorIs(t, err, ErrCorruptEntry)

	// Released by every record, the config stays for the next setup of
	// the Cache that saved it last, unlinked.
	require.NoError(t, c.ReleaseConfigs("pod1", digest, ""))
	_, err = c.SaveConfig("pod3", conf) // writes the shared copy again, and links it
	require.NoError(t, err)
	require.NoError(t, c.ReleaseConfigs("pod2", digest))
	require.NoError(t, c.ReleaseConfigs("pod3", digest))
	list, err = c.ListConfigs()
	require.NoError(t, err)
	require.Len(t, list, 1, "the shared copy, which no record links")
	assert.Equal(t, shared, list[0].Path)
	assert.Equal(t, uint64(1), list[0].Links)
	_, err = c.SaveConfig("pod4", conf) // links the copy kept
	require.NoError(t, err)

	// Another Cache on the dir (the runtime restarted) removes the copy
	// with the last link.
	other := New(c.Dir())
	require.NoError(t, other.ReleaseConfigs("pod4", digest))
	list, err = c.ListConfigs()
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = c.ReadConfig("pod4", digest)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, other.ReleaseConfigs("pod4", digest), "absent is fine")

	_, err = c.ReadConfig("pod1", "sha256:nope")
	require.ErrorIs(t, err, ErrInvalidName)
	_, err = c.SaveConfig("../x", conf)
	require.ErrorIs(t, err, ErrInvalidName)
}

// A Cache keeps the shared copies of the 16 configs it saved last when
// their last link goes, and removes the others'.
func TestReleaseConfigsKeepsRecentOnes(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	var digests []string
	for i := range maxWarmConfigs + 2 {
		d, err := c.SaveConfig("pod", []byte(fmt.Sprintf(`{"n":%d}`, i)))
		require.NoError(t, err)
		digests = append(digests, d)
	}
	_, err := c.SaveConfig("pod", []byte(`{"n":1}`)) // the second is recent again
	require.NoError(t, err)
	require.NoError(t, c.ReleaseConfigs("pod", digests...))
	list, err := c.ListConfigs()
	require.NoError(t, err)
	var kept []string
	for _, sc := range list {
		require.Empty(t, sc.ContainerID, "no link is left")
		kept = append(kept, sc.Digest)
	}
	want := append([]string{digests[1]}, digests[3:]...)
	assert.ElementsMatch(t, want, kept, "the first and the third went: the second was saved again")
}

// RemoveSavedConfig removes what ListConfigs listed, and nothing else.
func TestRemoveSavedConfig(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	digest, err := c.SaveConfig("pod1", []byte("{}"))
	require.NoError(t, err)
	list, err := c.ListConfigs()
	require.NoError(t, err)
	require.Len(t, list, 2)
	bad := list[1]
	bad.Path = filepath.Join(c.OrdersDir(), "pod1")
	require.Error(t, c.RemoveSavedConfig(bad))
	for _, sc := range list {
		require.NoError(t, c.RemoveSavedConfig(sc))
	}
	_, err = c.ReadConfig("pod1", digest)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// assertPrivate checks that path is a 0600 file and that every directory
// from the cache dir's ocicni/ down to it is 0700.
func assertPrivate(t *testing.T, c *Cache, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "%s", path)
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "%s", dir)
		if filepath.Base(dir) == "ocicni" {
			break
		}
	}
}

// Order records are private too, and keep the saved config's digest and
// the heal state of each attachment.
func TestOrderRecordKeepsConfigAndHeal(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	atts := []Attachment{
		{Network: "net1", IfName: "eth0", NetNS: "/run/netns/x", Config: ConfigDigest([]byte("a"))},
		{Network: "net2", IfName: "eth1", Config: ConfigDigest([]byte("b")), Heal: &Heal{
			Attempts: 3, Since: since, Next: since.Add(4 * time.Second), LastError: "busy",
		}},
	}
	require.NoError(t, c.WriteOrder("abc", atts))
	got, err := c.ReadOrder("abc")
	require.NoError(t, err)
	assert.Equal(t, atts, got)
	assertPrivate(t, c, filepath.Join(c.OrdersDir(), "abc"))

	// Reusing a retired record keeps the modes.
	require.NoError(t, c.RemoveOrder("abc"))
	require.NoError(t, c.WriteOrder("def", atts))
	assertPrivate(t, c, filepath.Join(c.OrdersDir(), "def"))

	require.ErrorIs(t, c.WriteOrder("bad", []Attachment{{Network: "n", IfName: "eth0", Config: "sha256:zz"}}), ErrInvalidName)
	path := filepath.Join(c.OrdersDir(), "bad")
	require.NoError(t, os.WriteFile(path, []byte(`{"kind":"ocicniOrderV1","containerId":"bad","attachments":[{"network":"n","ifName":"eth0","config":"x"}]}`), 0o600))
	_, err = c.ReadOrder("bad")
	require.ErrorIs(t, err, ErrCorruptEntry, "a record with a bad digest is not trusted")
}

// RemoveStrays removes what a setup killed before its record was written
// left: the record's links, the shared copies nobody else links, and the
// temporary record; nothing of containers whose IDs extend it.
func TestRemoveStrays(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	mine, err := c.SaveConfig("abc", []byte("mine"))
	require.NoError(t, err)
	shared, err := c.SaveConfig("abc", []byte("shared"))
	require.NoError(t, err)
	for _, other := range []string{"abc.x", "abc-1"} {
		_, err := c.SaveConfig(other, []byte("shared"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(c.OrdersDir(), ".tmp-"+other), nil, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(c.OrdersDir(), ".tmp-abc"), nil, 0o600))

	// The setup was killed: a Cache of the next process removes its
	// strays.
	c = New(c.Dir())
	require.NoError(t, c.RemoveStrays("abc"))
	_, err = c.ReadConfig("abc", mine)
	require.ErrorIs(t, err, fs.ErrNotExist, "its own config went with its links")
	list, err := c.ListConfigs()
	require.NoError(t, err)
	var names []string
	for _, sc := range list {
		names = append(names, filepath.Base(sc.Path))
	}
	hex := strings.TrimPrefix(shared, "sha256:")
	assert.ElementsMatch(t, []string{hex, ".cfg.abc.x." + hex, ".cfg.abc-1." + hex}, names)
	assert.NoFileExists(t, filepath.Join(c.OrdersDir(), ".tmp-abc"))
	assert.FileExists(t, filepath.Join(c.OrdersDir(), ".tmp-abc.x"))
	assert.FileExists(t, filepath.Join(c.OrdersDir(), ".tmp-abc-1"))

	// RemoveOrder takes an interrupted write's temporary file along.
	require.NoError(t, c.RemoveOrder("abc-1"))
	assert.NoFileExists(t, filepath.Join(c.OrdersDir(), ".tmp-abc-1"))
}

// ListOrdersAndConfigs returns what ListOrders and ListConfigs return,
// from one listing of the records' directory.
func TestListOrdersAndConfigs(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	ids, saved, err := c.ListOrdersAndConfigs()
	require.NoError(t, err, "no directory yet")
	assert.Empty(t, ids)
	assert.Empty(t, saved)

	for _, id := range []string{"b", "a", "c"} {
		d, err := c.SaveConfig(id, []byte(`{"id":"`+id+`"}`))
		require.NoError(t, err)
		_, err = c.SaveConfig(id, []byte(`{}`))
		require.NoError(t, err)
		require.NoError(t, c.WriteOrder(id, []Attachment{{Network: "n", IfName: "eth0", Config: d}}))
	}
	require.NoError(t, c.RemoveOrder("c")) // retired: a spare, not a record
	_, err = c.SaveConfig("orphan", []byte(`{}`))
	require.NoError(t, err)

	ids, saved, err = c.ListOrdersAndConfigs()
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids)
	wantIDs, err := c.ListOrders()
	require.NoError(t, err)
	assert.Equal(t, wantIDs, ids)
	wantSaved, err := c.ListConfigs()
	require.NoError(t, err)
	assert.Equal(t, wantSaved, saved)
	assert.Len(t, saved, 4+7, "4 shared copies, and 7 links")
}

// Saving a config never fails because its shared copy goes meanwhile, as
// it may at any moment once no record links it (another Cache's release,
// GC): each record gets its link, with the config's content.
func TestSaveConfigWhileTheCopyGoes(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	conf := []byte(`{"cniVersion":"1.0.0","name":"net","type":"bridge"}`)
	digest := ConfigDigest(conf)
	shared := filepath.Join(c.ConfigsDir(), strings.TrimPrefix(digest, "sha256:"))
	stop := make(chan struct{})
	removed := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				removed <- n
				return
			default:
			}
			if os.Remove(shared) == nil {
				n++
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprintf("pod%d-%d", w, i)
				if _, err := c.SaveConfig(id, conf); err != nil {
					errs[w] = err
					return
				}
				got, err := c.ReadConfig(id, digest)
				if err != nil || string(got) != string(conf) {
					errs[w] = fmt.Errorf("%s: read %q: %w", id, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	n := <-removed
	require.NoError(t, errors.Join(errs...))
	t.Logf("the copy was removed %d times meanwhile", n)
}
