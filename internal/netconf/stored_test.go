package netconf

import (
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetStored checks that a stored config is the loaded list only when
// it holds its very bytes, and otherwise the config the ADD ran with, its
// overrides (policy, timeouts) included, so that teardown runs DEL with
// it.
func TestSetStored(t *testing.T) {
	t.Parallel()
	loadedBytes := []byte(`{"cniVersion":"1.0.0","name":"net","ocicni.teardownPolicy":"tolerant","plugins":[{"type":"bridge"}]}`)
	loaded, err := libcni.NetworkConfFromBytes(loadedBytes)
	require.NoError(t, err)
	set := NewSet("", "", &Network{Name: "net", List: loaded, Overrides: Overrides{Policy: Tolerant}})

	tests := []struct {
		name       string
		cached     string
		network    string
		wantLoaded bool
		wantTypes  []string
		wantOver   Overrides
		wantErr    bool
	}{
		{name: "same bytes reuse the loaded list", cached: string(loadedBytes), network: "net", wantLoaded: true, wantTypes: []string{"bridge"}, wantOver: Overrides{Policy: Tolerant}},
		{
			name:      "file changed since ADD: the cached config runs",
			cached:    `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"},{"type":"portmap"}]}`,
			network:   "net",
			wantTypes: []string{"bridge", "portmap"},
		},
		{
			name:      "network no longer loaded",
			cached:    `{"cniVersion":"1.0.0","name":"gone","ocicni.teardownPolicy":"strict","ocicni.timeouts":{"del":"2s"},"plugins":[{"type":"ptp"}]}`,
			network:   "gone",
			wantTypes: []string{"ptp"},
			wantOver:  Overrides{Policy: Strict, Timeouts: Timeouts{Del: 2 * time.Second}},
		},
		{
			name:      "a bad key in a cached config: the defaults",
			cached:    `{"cniVersion":"1.0.0","name":"gone","ocicni.timeouts":{"del":"ten"},"plugins":[{"type":"ptp"}]}`,
			network:   "gone",
			wantTypes: []string{"ptp"},
		},
		{name: "cached config names another network", cached: string(loadedBytes), network: "other", wantErr: true},
		{name: "plugin type that leaves the bin dir", cached: `{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"../bridge"}]}`, network: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			list, over, err := set.Stored([]byte(tt.cached), tt.network, "entry")
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			if tt.wantLoaded {
				assert.Same(t, loaded, list)
			} else {
				assert.NotSame(t, loaded, list)
			}
			var types []string
			for _, p := range list.Plugins {
				types = append(types, p.Network.Type)
			}
			assert.Equal(t, tt.wantTypes, types)
			assert.Equal(t, tt.wantOver, over)
		})
	}
}
