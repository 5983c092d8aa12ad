package cache

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RemoveTemps removes the temporary files that crashed writes left, a
// record's and a saved config's, and nothing else of the layout: records,
// saved configs, their links and spares stay.
func TestRemoveTemps(t *testing.T) {
	c := New(t.TempDir())
	digest, err := c.SaveConfig("ctr-a", []byte(`{"name":"net"}`))
	require.NoError(t, err)
	require.NoError(t, c.WriteOrder("ctr-a", []Attachment{{Network: "net", IfName: "eth0", Config: digest}}))
	recordTemp := filepath.Join(c.OrdersDir(), tmpPrefix+"ctr-b")
	configTemp := filepath.Join(c.ConfigsDir(), tmpPrefix+"config-1234")
	spare := filepath.Join(c.OrdersDir(), spareFilePrefix+"0123456789abcdef-1")
	for _, p := range []string{recordTemp, configTemp, spare} {
		require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
	}
	list := func() []string {
		var out []string
		for _, d := range []string{c.OrdersDir(), c.ConfigsDir()} {
			des, err := os.ReadDir(d)
			require.NoError(t, err)
			for _, de := range des {
				out = append(out, filepath.Join(d, de.Name()))
			}
		}
		sort.Strings(out)
		return out
	}
	before := list()

	removed, err := c.RemoveTemps()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{recordTemp, configTemp}, removed)
	var want []string
	for _, p := range before {
		if p != recordTemp && p != configTemp {
			want = append(want, p)
		}
	}
	assert.Equal(t, want, list(), "the record, the saved config, its link and the spare stay")
	got, err := c.ReadOrder("ctr-a")
	require.NoError(t, err)
	require.Len(t, got, 1)
	b, err := c.ReadConfig("ctr-a", digest)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"net"}`, string(b))

	removed, err = New(t.TempDir()).RemoveTemps()
	require.NoError(t, err, "an empty cache dir has nothing to remove")
	assert.Empty(t, removed)
}
