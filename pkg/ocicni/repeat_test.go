package ocicni

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Which recorded attachments are live, and which differences from a
// request refuse a repeated setup. Pure logic: no root.
func TestLiveAttachmentRule(t *testing.T) {
	t.Parallel()
	conf := []byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"bridge"}]}`)
	args := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAME", "web"}}
	ports := []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}
	// cached returns ports as libcni stores them: encoded and decoded.
	var cachedPorts map[string]any
	b, err := json.Marshal(map[string]any{capPortMappings: ports})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cachedPorts))

	entry := func(mod func(*cache.Entry)) *cache.Entry {
		e := &cache.Entry{Network: "net", IfName: "eth0", NetNS: "/run/netns/a", Config: conf, CNIArgs: args, CapabilityArgs: cachedPorts}
		if mod != nil {
			mod(e)
		}
		return e
	}
	line := func(mod func(*cache.Attachment)) *cache.Attachment {
		a := &cache.Attachment{Network: "net", IfName: "eth0", NetNS: "/run/netns/a", Config: cache.ConfigDigest(conf)}
		if mod != nil {
			mod(a)
		}
		return a
	}
	p := &plan{
		NetAttachment: NetAttachment{Name: "net", Ifname: "eth0"},
		list:          &libcni.NetworkConfigList{Name: "net", CNIVersion: "1.0.0", Bytes: conf},
		rt: &libcni.RuntimeConf{
			NetNS: "/run/netns/a", IfName: "eth0", Args: args,
			CapabilityArgs: map[string]any{capPortMappings: ports},
		},
	}
	tests := []struct {
		name string
		slot knownAttachment
		live bool
		diff string // "" when identical; checked only when live
	}{
		{name: "recorded before ADD, never cached", slot: knownAttachment{rec: line(nil)}},
		{name: "cached but a DEL failed since", slot: knownAttachment{entry: entry(nil), rec: line(func(a *cache.Attachment) {
			a.Heal = &cache.Heal{Attempts: 1, Since: time.Now()}
		})}},
		{name: "corrupt entry", slot: knownAttachment{corrupt: &cache.EntryError{Network: "net", IfName: "eth0"}, rec: line(nil)}},
		{name: "identical", slot: knownAttachment{entry: entry(nil), rec: line(nil)}, live: true},
		{name: "cached by another library, no record", slot: knownAttachment{entry: entry(nil)}, live: true},
		{name: "netns only in the record", slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.NetNS = "" }), rec: line(nil)}, live: true},
		{
			name: "config changed", live: true, diff: "its config differs from the loaded one",
			slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.Config = []byte(`{"name":"net"}`) }), rec: line(nil)},
		},
		{
			name: "saved config differs", live: true, diff: "its config differs from the loaded one",
			slot: knownAttachment{entry: entry(nil), rec: line(func(a *cache.Attachment) { a.Config = cache.ConfigDigest([]byte("x")) })},
		},
		{
			name: "another netns", live: true, diff: "lives in netns /run/netns/b",
			slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.NetNS = "/run/netns/b" })},
		},
		{
			name: "record names another netns", live: true, diff: "lives in netns /run/netns/a",
			slot: knownAttachment{entry: entry(nil), rec: line(func(a *cache.Attachment) { a.NetNS = "/run/netns/b" })},
		},
		{
			name: "netns unknown", live: true, diff: "its netns is not known",
			slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.NetNS = "" })},
		},
		{
			name: "other CNI_ARGS", live: true, diff: "its CNI_ARGS differ",
			slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.CNIArgs = [][2]string{{"K8S_POD_NAME", "db"}} })},
		},
		{
			name: "other capabilities", live: true, diff: "its runtime config differs",
			slot: knownAttachment{entry: entry(func(e *cache.Entry) { e.CapabilityArgs = nil })},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.slot
			s.NetAttachment = p.NetAttachment
			assert.Equal(t, tc.live, s.live())
			if tc.live {
				assert.Equal(t, tc.diff, liveDiff(&s, p))
			}
		})
	}
}

func TestSameCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		cached, want map[string]any
		same         bool
	}{
		{name: "both empty", cached: nil, want: map[string]any{}, same: true},
		{name: "one empty", cached: nil, want: map[string]any{capCgroupPath: "/a"}},
		{
			name:   "typed values equal their JSON",
			cached: map[string]any{capBandwidth: map[string]any{"ingressRate": 1.0}},
			want:   map[string]any{capBandwidth: map[string]uint64{"ingressRate": 1}},
			same:   true,
		},
		{name: "other value", cached: map[string]any{capCgroupPath: "/a"}, want: map[string]any{capCgroupPath: "/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.same, sameCapabilities(tc.cached, tc.want))
		})
	}
}
