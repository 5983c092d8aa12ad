package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// files lists the saved configs and the records' links to them, by path
// relative to the cache's ocicni dir.
func files(t *testing.T, c *Cache) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{c.ConfigsDir(), c.OrdersDir()} {
		des, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, de := range des {
			out = append(out, filepath.Join(filepath.Base(dir), de.Name()))
		}
	}
	return out
}

// UndoSaveConfig removes what its save made and nothing else: not the
// link of an earlier record of the same container, not a copy that was
// there before, not a copy another record linked since.
func TestUndoSaveConfig(t *testing.T) {
	conf := []byte(`{"name":"net"}`)
	hex := ConfigDigest(conf)[len("sha256:"):]
	copyName, link1, link2 := "configs/"+hex, "attachments/.cfg.pod1."+hex, "attachments/.cfg.pod2."+hex
	for _, tc := range []struct {
		name string
		// before saves conf for these containers first (and release then
		// releases pod1's link, as a teardown does); after, between the
		// save of pod1 and its undo.
		before, after []string
		release       bool
		want          []string
	}{
		{name: "new link and copy", want: nil},
		{name: "copy kept from a teardown", before: []string{"pod1"}, release: true, want: []string{copyName}},
		{name: "copy another record links", before: []string{"pod2"}, want: []string{copyName, link2}},
		{name: "link of an earlier record", before: []string{"pod1"}, want: []string{copyName, link1}},
		{name: "copy linked since", after: []string{"pod2"}, want: []string{copyName, link2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(filepath.Join(t.TempDir(), "cni"))
			for _, id := range tc.before {
				_, err := c.SaveConfig(id, conf)
				require.NoError(t, err)
			}
			if tc.release {
				require.NoError(t, c.ReleaseConfigs("pod1", ConfigDigest(conf)))
			}
			s, err := c.SaveConfigUndoable("pod1", conf)
			require.NoError(t, err)
			assert.Equal(t, ConfigDigest(conf), s.Digest)
			for _, id := range tc.after {
				_, err := c.SaveConfig(id, conf)
				require.NoError(t, err)
			}
			require.NoError(t, c.UndoSaveConfig(s))
			assert.ElementsMatch(t, tc.want, files(t, c))
			require.NoError(t, c.UndoSaveConfig(s), "an absent file is not an error")
		})
	}
}
