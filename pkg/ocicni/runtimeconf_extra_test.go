package ocicni

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildRuntimeConfExtras(t *testing.T) {
	tests := []struct {
		name     string
		rc       RuntimeConfig
		wantArgs [][2]string // appended after the manager's own
		wantCaps map[string]interface{}
		wantErr  bool
	}{
		{name: "none", wantCaps: map[string]interface{}{}},
		{
			name:     "extra args after the manager's, which they cannot override",
			rc:       RuntimeConfig{ExtraArgs: [][2]string{{"K8S_POD_NAME", "evil"}, {"A", "1"}, {"A", "2"}}},
			wantArgs: [][2]string{{"A", "1"}},
			wantCaps: map[string]interface{}{},
		},
		{
			name:     "typed capabilities win over extras",
			rc:       RuntimeConfig{CgroupPath: "/typed", ExtraCapabilities: map[string]interface{}{"cgroupPath": "/extra", "dns": 1}},
			wantCaps: map[string]interface{}{"cgroupPath": "/typed", "dns": 1},
		},
		{name: "key with =", rc: RuntimeConfig{ExtraArgs: [][2]string{{"A=B", "1"}}}, wantErr: true},
		{name: "value with ;", rc: RuntimeConfig{ExtraArgs: [][2]string{{"A", "1;B=2"}}}, wantErr: true},
		{name: "empty key", rc: RuntimeConfig{ExtraArgs: [][2]string{{"", "1"}}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CNI_ARGS", "")
			pod := &PodNetwork{ID: "pod1", Name: "web", RuntimeConfig: map[string]RuntimeConfig{"net": tt.rc}}
			rt, err := buildRuntimeConf(pod, NetAttachment{Name: "net", Ifname: "eth0"}, false)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidArgument)
				return
			}
			require.NoError(t, err)
			extra := rt.Args[5:]
			if len(extra) == 0 {
				extra = nil
			}
			assert.Equal(t, tt.wantArgs, extra)
			assert.Equal(t, [2]string{"K8S_POD_NAME", "web"}, rt.Args[2])
			assert.Equal(t, tt.wantCaps, rt.CapabilityArgs)
		})
	}
}
