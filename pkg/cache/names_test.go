package cache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		value  string
		reason string // "" means valid
	}{
		{"abc", ""},
		{"0123456789abcdef", ""},
		{"my-net_1.2", ""},
		{"a.b", ""},
		{".hidden", ""},
		{"eth0:1", ""},
		{"ünïcode", ""},
		{"", "is empty"},
		{".", `is "."`},
		{"..", `contains ".."`},
		{"../x", `contains ".."`},
		{"x/..", `contains ".."`},
		{"a..b", `contains ".."`},
		{"a/b", `contains '/'`},
		{"/abs", `contains '/'`},
		{`a\b`, `contains '\'`},
		{"a\x00", "contains NUL"},
		{"a\n", "contains a control character"},
		{"a\tb", "contains a control character"},
		{"a\x7f", "contains a control character"},
		{"a\u0085", "contains a control character"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			err := ValidateName(FieldContainerID, tt.value)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidName)
			var ine *InvalidNameError
			require.ErrorAs(t, err, &ine)
			assert.Equal(t, InvalidNameError{FieldContainerID, tt.value, tt.reason}, *ine)
			assert.Contains(t, err.Error(), "container ID")
		})
	}
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
