package ocicni

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// The go-cni face's memory source: a manager with a memory source loads what the
// source holds, never its conf dir, reloads it on Reload, and sets a pod
// up on it.
func TestMemorySourceOption(t *testing.T) {
	e := newFakeEnv(t) // its conf dir holds "net", which must not load
	src := &netconf.MemorySource{}
	m, fx := e.manager(t, netconf.WithMemorySource([]Option(nil), src)...)
	assert.Empty(t, m.Networks())

	src.Set(netconf.MemoryConfig{Name: "gocni:0", Bytes: []byte(conflist("mem", "1.0.0", "fake"))})
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, []string{"mem"}, m.Networks())
	assert.Equal(t, "mem", m.GetDefaultNetworkName())

	pod := PodNetwork{Name: "web", Namespace: "default", ID: "pod1", NetNS: e.nsPath, Networks: []NetAttachment{{Name: "mem", Ifname: "eth0"}}}
	_, err := m.SetUpPodWithContext(context.Background(), pod)
	require.NoError(t, err)
	assert.Equal(t, 1, fx.Count(fakecni.Match{Verb: "ADD", Network: "mem"}))

	_, err = m.SetUpPodWithContext(context.Background(), PodNetwork{Name: "web", Namespace: "default", ID: "pod2", NetNS: e.nsPath, Networks: []NetAttachment{{Name: "net"}}})
	var nf *NetworkNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "memory", nf.ConfDir)

	// nil means the default, as for every option: the conf dir.
	m2, _ := e.manager(t, netconf.WithMemorySource([]Option(nil), nil)...)
	assert.Equal(t, []string{"net"}, m2.Networks())
}
