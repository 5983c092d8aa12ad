package ocicni

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAssignIfnames(t *testing.T) {
	tests := []struct {
		name       string
		requested  []NetAttachment
		defaultNet string
		want       []NetAttachment
		wantErr    error
	}{
		{
			name:       "default network only",
			defaultNet: "net",
			want:       []NetAttachment{{Name: "net", Ifname: "eth0"}},
		},
		{
			name:    "no default and nothing requested",
			wantErr: ErrNoDefaultNetwork,
		},
		{
			name:      "auto names in order",
			requested: []NetAttachment{{Name: "a"}, {Name: "b"}, {Name: "c"}},
			want:      []NetAttachment{{Name: "a", Ifname: "eth0"}, {Name: "b", Ifname: "eth1"}, {Name: "c", Ifname: "eth2"}},
		},
		{
			name:      "auto names skip requested ones",
			requested: []NetAttachment{{Name: "a"}, {Name: "b", Ifname: "eth0"}, {Name: "c"}, {Name: "d", Ifname: "eth2"}},
			want: []NetAttachment{
				{Name: "a", Ifname: "eth1"},
				{Name: "b", Ifname: "eth0"},
				{Name: "c", Ifname: "eth3"},
				{Name: "d", Ifname: "eth2"},
			},
		},
		{
			name:      "same network twice is allowed",
			requested: []NetAttachment{{Name: "a"}, {Name: "a", Ifname: "net1"}},
			want:      []NetAttachment{{Name: "a", Ifname: "eth0"}, {Name: "a", Ifname: "net1"}},
		},
		{
			name:      "duplicate requested ifname",
			requested: []NetAttachment{{Name: "a", Ifname: "net1"}, {Name: "b", Ifname: "net1"}},
			wantErr:   ErrInvalidArgument,
		},
		{
			name:      "ifname with path separator",
			requested: []NetAttachment{{Name: "a", Ifname: "../x"}},
			wantErr:   ErrInvalidArgument,
		},
		{
			name:      "ifname too long",
			requested: []NetAttachment{{Name: "a", Ifname: "abcdefghijklmnop"}},
			wantErr:   ErrInvalidArgument,
		},
		{
			name:      "ifname with colon",
			requested: []NetAttachment{{Name: "a", Ifname: "eth0:1"}},
			wantErr:   ErrInvalidArgument,
		},
		{
			name:      "network name with dot-dot",
			requested: []NetAttachment{{Name: "../../etc"}},
			wantErr:   ErrInvalidArgument,
		},
		{
			name:      "network name with control char",
			requested: []NetAttachment{{Name: "a\nb"}},
			wantErr:   ErrInvalidArgument,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]NetAttachment(nil), tt.requested...)
			got, err := assignIfnames(tt.requested, tt.defaultNet)
			assert.Equal(t, in, tt.requested, "the caller's slice is not modified")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCheckPodArgs(t *testing.T) {
	tests := []struct {
		name  string
		pod   PodNetwork
		field string // empty: valid
	}{
		{name: "valid", pod: PodNetwork{ID: "abc123", Name: "p", Namespace: "ns", UID: "u-1"}},
		{name: "empty ID", pod: PodNetwork{}, field: "container ID"},
		{name: "ID with slash", pod: PodNetwork{ID: "a/b"}, field: "container ID"},
		{name: "ID traversal", pod: PodNetwork{ID: ".."}, field: "container ID"},
		{name: "ID with dot-dot inside", pod: PodNetwork{ID: "a..b"}, field: "container ID"},
		{name: "ID with NUL", pod: PodNetwork{ID: "a\x00b"}, field: "container ID"},
		{name: "ID with newline", pod: PodNetwork{ID: "ab\n"}, field: "container ID"},
		{name: "ID with semicolon", pod: PodNetwork{ID: "a;IP=1.2.3.4"}, field: "container ID"},
		{name: "pod name injects IP", pod: PodNetwork{ID: "x", Name: "p;IP=10.0.0.9"}, field: "pod name"},
		{name: "namespace with equals", pod: PodNetwork{ID: "x", Namespace: "a=b"}, field: "pod namespace"},
		{name: "UID with control char", pod: PodNetwork{ID: "x", UID: "u\t"}, field: "pod UID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPodArgs(&tt.pod)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var iae *InvalidArgumentError
			require.ErrorAs(t, err, &iae)
			assert.Equal(t, tt.field, iae.Field)
			require.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
}

func TestCheckNetNS(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, checkNetNS(dir))
	for _, p := range []string{"", "relative/ns", dir + "/missing"} {
		err := checkNetNS(p)
		var iae *InvalidArgumentError
		require.ErrorAs(t, err, &iae, p)
		assert.Equal(t, "netns path", iae.Field)
	}
}

func TestBuildRuntimeConf(t *testing.T) {
	annotations := map[string]string{"a": "b"}
	pod := &PodNetwork{
		Name: "pod", Namespace: "ns", ID: "id1", UID: "uid", NetNS: "/run/netns/x",
		Aliases: map[string][]string{"net": {"alias"}},
		RuntimeConfig: map[string]RuntimeConfig{
			"net": {
				IP: "10.1.2.3", MAC: "02:00:00:00:00:01",
				PortMappings: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
				Bandwidth:    &BandwidthConfig{IngressRate: 1, IngressBurst: 2, EgressRate: 3, EgressBurst: 4},
				IpRanges:     [][]IpRange{{{Subnet: "10.1.2.0/24"}}},
				CgroupPath:   "/kubepods/pod1", PodAnnotations: &annotations,
			},
		},
	}
	t.Setenv("CNI_ARGS", "FOO=bar;K8S_POD_NAME=evil;IP=6.6.6.6;junk")
	rt, err := buildRuntimeConf(pod, NetAttachment{Name: "net", Ifname: "eth0"}, false)
	require.NoError(t, err)
	assert.Equal(t, "id1", rt.ContainerID)
	assert.Equal(t, "/run/netns/x", rt.NetNS)
	assert.Equal(t, "eth0", rt.IfName)
	assert.Equal(t, [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", "ns"},
		{"K8S_POD_NAME", "pod"},
		{"K8S_POD_INFRA_CONTAINER_ID", "id1"},
		{"K8S_POD_UID", "uid"},
		{"FOO", "bar"},
		{"IP", "10.1.2.3"},
		{"MAC", "02:00:00:00:00:01"},
	}, rt.Args, "env CNI_ARGS never override the keys set by the manager")
	assert.Equal(t, pod.RuntimeConfig["net"].PortMappings, rt.CapabilityArgs[capPortMappings])
	assert.Equal(t, map[string]uint64{"ingressRate": 1, "ingressBurst": 2, "egressRate": 3, "egressBurst": 4},
		rt.CapabilityArgs[capBandwidth])
	assert.Equal(t, pod.RuntimeConfig["net"].IpRanges, rt.CapabilityArgs[capIPRanges])
	assert.Equal(t, pod.Aliases, rt.CapabilityArgs[capAliases])
	assert.Equal(t, "/kubepods/pod1", rt.CapabilityArgs[capCgroupPath])
	assert.Equal(t, &annotations, rt.CapabilityArgs[capPodAnnotations])

	// A network without runtime config gets no capabilities but aliases.
	rt, err = buildRuntimeConf(pod, NetAttachment{Name: "other", Ifname: "eth1"}, false)
	require.NoError(t, err)
	assert.Len(t, rt.CapabilityArgs, 1)
	assert.NotContains(t, rt.Args, [2]string{"IP", "10.1.2.3"})
}

// With WithArgsAsGiven, CNI_ARGS holds the pod's own pairs only: none
// of ocicni's, nothing of the process's CNI_ARGS, and ExtraArgs IP and
// MAC pass unless the typed fields set them.
func TestBuildRuntimeConfArgsAsGiven(t *testing.T) {
	t.Setenv("CNI_ARGS", "FOO=bar;K8S_POD_NAME=evil")
	tests := []struct {
		name string
		rc   RuntimeConfig
		want [][2]string
	}{
		{name: "nothing given", want: nil},
		{
			name: "extra args in order, IP and MAC included",
			rc:   RuntimeConfig{ExtraArgs: [][2]string{{"K8S_POD_NAME", "web"}, {"IP", "10.1.2.3"}, {"MAC", "02:00:00:00:00:01"}, {"K8S_POD_NAME", "dup"}}},
			want: [][2]string{{"K8S_POD_NAME", "web"}, {"IP", "10.1.2.3"}, {"MAC", "02:00:00:00:00:01"}},
		},
		{
			name: "typed IP and MAC win over extra args",
			rc:   RuntimeConfig{IP: "10.9.9.9", MAC: "02:00:00:00:00:09", ExtraArgs: [][2]string{{"IP", "10.1.2.3"}, {"A", "b"}}},
			want: [][2]string{{"IP", "10.9.9.9"}, {"MAC", "02:00:00:00:00:09"}, {"A", "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &PodNetwork{
				Name: "pod", Namespace: "ns", ID: "id1", UID: "uid", NetNS: "/run/netns/x",
				RuntimeConfig: map[string]RuntimeConfig{"net": tt.rc},
			}
			rt, err := buildRuntimeConf(pod, NetAttachment{Name: "net", Ifname: "eth0"}, true)
			require.NoError(t, err)
			assert.Equal(t, tt.want, rt.Args)
		})
	}
}

func TestBuildRuntimeConfRejectsBadStaticAddresses(t *testing.T) {
	for _, rc := range []RuntimeConfig{{IP: "10.0.0.300"}, {IP: "nope"}, {MAC: "zz:zz"}, {MAC: "02:00:00:00:00"}} {
		pod := &PodNetwork{ID: "x", RuntimeConfig: map[string]RuntimeConfig{"net": rc}}
		_, err := buildRuntimeConf(pod, NetAttachment{Name: "net", Ifname: "eth0"}, false)
		var iae *InvalidArgumentError
		require.ErrorAs(t, err, &iae, "%+v", rc)
		assert.Contains(t, iae.Field, `network "net"`)
	}
}
