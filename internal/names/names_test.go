package names

import (
	"strings"
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
			assert.Equal(t, InvalidNameError{Field: FieldContainerID, Value: tt.value, Reason: tt.reason}, *ine)
			assert.Contains(t, err.Error(), "container ID")
		})
	}
}

// TestValidateNames checks the order of the checks (path, length,
// libcni's) and which field a failure names.
func TestValidateNames(t *testing.T) {
	tests := []struct {
		name                string
		network, id, ifname string
		field, reason       string // "" means valid
	}{
		{name: "valid", network: "net1", id: "abc", ifname: "eth0"},
		{name: "longest names", network: strings.Repeat("n", MaxNetworkNameLen), id: strings.Repeat("i", MaxContainerIDLen), ifname: strings.Repeat("e", MaxIfNameLen)},
		{name: "network path", network: "../x", id: "abc", ifname: "eth0", field: FieldNetwork, reason: `contains ".."`},
		{name: "network too long", network: strings.Repeat("n", MaxNetworkNameLen+1), id: "abc", ifname: "eth0", field: FieldNetwork, reason: "is 101 bytes long, more than 100"},
		{name: "network libcni", network: "-net", id: "abc", ifname: "eth0", field: FieldNetwork, reason: "invalid characters found in network name"},
		{name: "id too long", network: "net1", id: strings.Repeat("i", MaxContainerIDLen+1), ifname: "eth0", field: FieldContainerID, reason: "is 129 bytes long, more than 128"},
		{name: "id libcni", network: "net1", id: "a b", ifname: "eth0", field: FieldContainerID},
		{name: "ifname too long", network: "net1", id: "abc", ifname: strings.Repeat("e", MaxIfNameLen+1), field: FieldIfName, reason: "is 16 bytes long, more than 15"},
		{name: "ifname libcni", network: "net1", id: "abc", ifname: "eth:0", field: FieldIfName},
		{name: "network first", network: "", id: "..", ifname: "a/b", field: FieldNetwork, reason: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateNames(tt.network, tt.id, tt.ifname)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidName)
			var ine *InvalidNameError
			require.ErrorAs(t, err, &ine)
			assert.Equal(t, tt.field, ine.Field)
			assert.NotEmpty(t, ine.Reason)
			if tt.reason != "" {
				assert.Equal(t, tt.reason, ine.Reason)
			}
		})
	}
}
