package cache

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// Saved configs are content-addressed, kept once, private, and checked
// against their digest when read back.
func TestSaveConfig(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	conf := []byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"}]}`)
	digest, err := c.SaveConfig(conf)
	require.NoError(t, err)
	assert.Equal(t, ConfigDigest(conf), digest)
	got, err := c.ReadConfig(digest)
	require.NoError(t, err)
	assert.Equal(t, conf, got)

	// Saving it again keeps one copy and marks it as in use now.
	path := filepath.Join(c.ConfigsDir(), strings.TrimPrefix(digest, "sha256:"))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
	again, err := c.SaveConfig(conf)
	require.NoError(t, err)
	assert.Equal(t, digest, again)
	list, err := c.ListConfigs()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, digest, list[0].Digest)
	assert.True(t, list[0].ModTime.After(old.Add(time.Minute)), "saving touched it")

	assertPrivate(t, c, path)

	// A copy whose content no longer matches its name is corrupt.
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o600))
	_, err = c.ReadConfig(digest)
	require.ErrorIs(t, err, ErrCorruptEntry)

	require.NoError(t, c.RemoveConfig(digest))
	require.NoError(t, c.RemoveConfig(digest), "absent is fine")
	_, err = c.ReadConfig(digest)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = c.ReadConfig("sha256:nope")
	require.ErrorIs(t, err, ErrInvalidName)
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
