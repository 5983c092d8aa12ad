package cache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOrderRoundTrip(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	atts := []Attachment{{Network: "net2", IfName: "eth0", NetNS: "/run/netns/x"}, {Network: "my-net", IfName: "net1"}, {Network: "net1", IfName: "net2"}}

	got, err := c.ReadOrder("abc")
	require.NoError(t, err)
	assert.Nil(t, got, "absent")

	require.NoError(t, c.WriteOrder("abc", atts))
	got, err = c.ReadOrder("abc")
	require.NoError(t, err)
	assert.Equal(t, atts, got)

	// Rewriting replaces the record.
	require.NoError(t, c.WriteOrder("abc", atts[:1]))
	got, err = c.ReadOrder("abc")
	require.NoError(t, err)
	assert.Equal(t, atts[:1], got)

	// An empty record is not an absent one.
	require.NoError(t, c.WriteOrder("empty", nil))
	got, err = c.ReadOrder("empty")
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)

	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Equal(t, []string{"abc", "empty"}, ids)

	require.NoError(t, c.RemoveOrder("abc"))
	require.NoError(t, c.RemoveOrder("abc"), "absent is fine")
	got, err = c.ReadOrder("abc")
	require.NoError(t, err)
	assert.Nil(t, got)
}

func TestOrderFileFormat(t *testing.T) {
	c := New(t.TempDir())
	require.NoError(t, c.WriteOrder("abc", []Attachment{{Network: "net1", IfName: "eth0"}, {Network: "net2", IfName: "eth1"}}))

	path := filepath.Join(c.Dir(), "ocicni", "attachments", "abc")
	assert.Equal(t, filepath.Dir(path), c.OrdersDir())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join("testdata", "order-abc.json"))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))

	// The order files stay out of libcni's results directory.
	l, err := c.List()
	require.NoError(t, err)
	assert.Equal(t, Listing{}, l)
}

func TestOrderModes(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "cni"))
	require.NoError(t, c.WriteOrder("abc", []Attachment{{Network: "net1", IfName: "eth0"}}))

	for _, dir := range []string{c.Dir(), filepath.Join(c.Dir(), "ocicni"), c.OrdersDir()} {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), dir)
	}
	fi, err := os.Stat(filepath.Join(c.OrdersDir(), "abc"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	des, err := os.ReadDir(c.OrdersDir())
	require.NoError(t, err)
	assert.Len(t, des, 1, "no temporary file is left behind")
}

func TestOrderCorrupt(t *testing.T) {
	tests := []struct {
		name, data string
	}{
		{"empty", ""},
		{"truncated", `{"kind":"ocicniOrderV1","contai`},
		{"wrong kind", `{"kind":"cniCacheV1","containerId":"abc","attachments":[]}`},
		{"other container", `{"kind":"ocicniOrderV1","containerId":"abcd","attachments":[]}`},
		{"no attachments", `{"kind":"ocicniOrderV1","containerId":"abc"}`},
		{"attachments not a list", `{"kind":"ocicniOrderV1","containerId":"abc","attachments":{}}`},
		{"attachment without ifName", `{"kind":"ocicniOrderV1","containerId":"abc","attachments":[{"network":"n"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(t.TempDir())
			require.NoError(t, os.MkdirAll(c.OrdersDir(), 0o700))
			path := filepath.Join(c.OrdersDir(), "abc")
			require.NoError(t, os.WriteFile(path, []byte(tt.data), 0o600))

			got, err := c.ReadOrder("abc")
			assert.Nil(t, got)
			require.ErrorIs(t, err, ErrCorruptEntry)
			var ee *EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, path, ee.Path)
			assert.Equal(t, "abc", ee.ContainerID)
		})
	}
}

func TestOrderInvalidNames(t *testing.T) {
	c := New(t.TempDir())
	for _, id := range []string{"", ".", "..", "../x", "a/b", "a\x00", "a\n", ".tmp-abc"} {
		require.ErrorIs(t, c.WriteOrder(id, nil), ErrInvalidName, "%q", id)
		_, err := c.ReadOrder(id)
		require.ErrorIs(t, err, ErrInvalidName, "%q", id)
		require.ErrorIs(t, c.RemoveOrder(id), ErrInvalidName, "%q", id)
	}
	for _, att := range []Attachment{{Network: "", IfName: "eth0"}, {Network: "net", IfName: ""}, {Network: "../net", IfName: "eth0"}, {Network: "net", IfName: "a/b"}} {
		require.ErrorIs(t, c.WriteOrder("abc", []Attachment{att}), ErrInvalidName, "%+v", att)
	}
	_, err := os.Stat(c.OrdersDir())
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written for invalid input")
}

func TestListOrders(t *testing.T) {
	c := New(t.TempDir())
	ids, err := c.ListOrders()
	require.NoError(t, err)
	assert.Nil(t, ids, "missing directory")

	require.NoError(t, c.WriteOrder("b", nil))
	require.NoError(t, c.WriteOrder("a", nil))
	// Leftovers of an interrupted write and stray directories are skipped.
	require.NoError(t, os.WriteFile(filepath.Join(c.OrdersDir(), ".tmp-c-123"), nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(c.OrdersDir(), "dir"), 0o700))

	ids, err = c.ListOrders()
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids)
}
