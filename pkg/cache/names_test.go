package cache

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/names"
)

// TestNameRulesReexported checks that the name rules, which live in
// package names, keep this package's API: its functions reject what the
// rules reject, and their errors match this package's ErrInvalidName and
// *InvalidNameError (the rules themselves are tested in package names).
func TestNameRulesReexported(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"ValidateName", ValidateName(FieldNetNS, "a/b"), FieldNetNS},
		{"ValidateNetworkName", ValidateNetworkName("-net"), FieldNetwork},
		{"ValidateContainerID", ValidateContainerID(".."), FieldContainerID},
		{"ValidateIfName", ValidateIfName("eth:0"), FieldIfName},
		{"ValidateNames", ValidateNames("net1", "abc", strings.Repeat("e", MaxIfNameLen+1)), FieldIfName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, ErrInvalidName)
			require.ErrorIs(t, tt.err, names.ErrInvalidName)
			var ine *InvalidNameError
			require.ErrorAs(t, tt.err, &ine)
			assert.Equal(t, tt.field, ine.Field)
			assert.True(t, strings.HasPrefix(tt.err.Error(), "cache: invalid "+tt.field+" "), tt.err.Error())
		})
	}
	require.NoError(t, ValidateNames("net1", "abc", "eth0"))
}

func TestFileName(t *testing.T) {
	tests := []struct {
		network, id, ifname string
		want                string
		badField            string
	}{
		{"net1", "abc", "eth0", "net1-abc-eth0", ""},
		{"my-net", "abc-def", "net-1", "my-net-abc-def-net-1", ""},
		{"", "abc", "eth0", "", FieldNetwork},
		{"net1", "../../etc", "eth0", "", FieldContainerID},
		{"net1", "abc", "a/b", "", FieldIfName},
		{"net/1", "..", "a\n", "", FieldNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.want+tt.badField, func(t *testing.T) {
			got, err := FileName(tt.network, tt.id, tt.ifname)
			if tt.badField == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			var ine *InvalidNameError
			require.ErrorAs(t, err, &ine)
			assert.Equal(t, tt.badField, ine.Field)
			assert.Empty(t, got)
		})
	}
}

func TestSplitFileName(t *testing.T) {
	tests := []struct {
		name, id        string
		network, ifname string
		ok              bool
	}{
		{"net1-abc-eth0", "abc", "net1", "eth0", true},
		{"net1-abcd-eth0", "abc", "", "", false},
		{"net1-xabc-eth0", "abc", "", "", false},
		{"my-net-abc-def-net1", "abc-def", "my-net", "net1", true},
		{"my-net-abc-def-net1", "abc", "my-net", "def-net1", true},
		{"net1-def-abc-eth0", "abc", "net1-def", "eth0", true},
		{"a-b-a-b-a", "b", "a", "a-b-a", true},
		{"-abc-abc-eth0", "abc", "-abc", "eth0", true},
		{"-abc-eth0", "abc", "", "", false},
		{"net-abc-", "abc", "", "", false},
		{"net-abc-abc-", "abc", "net", "abc-", true},
		{"abc", "abc", "", "", false},
		{"net1-abc-eth0", "", "", "", false},
		{"", "abc", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.id, func(t *testing.T) {
			network, ifname, ok := SplitFileName(tt.name, tt.id)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.network, network)
			assert.Equal(t, tt.ifname, ifname)
		})
	}
}

func TestGuessNames(t *testing.T) {
	named := &EntryError{Path: "/c/results/net1-abc-eth0", Network: "net1", ContainerID: "abc", IfName: "eth0"}
	tests := []struct {
		name     string
		in       *EntryError
		ids      []string
		networks []string
		want     *EntryError // nil: in itself
	}{
		{name: "named by its content", in: named, ids: []string{"other"}},
		{
			name: "around a known ID", in: &EntryError{Path: "/c/results/my-net-abc-def-eth0"}, ids: []string{"nope", "abc-def"},
			want: &EntryError{Path: "/c/results/my-net-abc-def-eth0", Network: "my-net", ContainerID: "abc-def", IfName: "eth0"},
		},
		{
			name: "after a known network", in: &EntryError{Path: "/c/results/my-net-abc-eth0"}, networks: []string{"my-net"},
			want: &EntryError{Path: "/c/results/my-net-abc-eth0", Network: "my-net", ContainerID: "abc", IfName: "eth0"},
		},
		{name: "nothing known", in: &EntryError{Path: "/c/results/net1-abc-eth0"}},
		{name: "no split", in: &EntryError{Path: "/c/results/garbage"}, ids: []string{"abc"}, networks: []string{"net1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.in
			out := GuessNames([]*EntryError{tt.in}, tt.ids, tt.networks)
			require.Len(t, out, 1)
			assert.Equal(t, before, *tt.in, "the input is not modified")
			if tt.want == nil {
				assert.Same(t, tt.in, out[0])
				return
			}
			assert.NotSame(t, tt.in, out[0])
			assert.Equal(t, *tt.want, *out[0])
		})
	}
}
