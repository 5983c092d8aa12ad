//go:build !nogctests

package ocicni

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// validAttachmentsKey is where the GC verb's stdin carries the attachments
// the runtime still uses (libcni's types.GCAttachment, as JSON).
const validAttachmentsKey = "cni.dev/valid-attachments"

// gcConflist returns a bridge+host-local network at CNI 1.1.0 with a 1.1.0
// recorder chained after it, so that GC verbs and the valid attachments
// they carry are logged. top adds top-level keys such as disableGC.
func (e *itEnv) gcConflist(name string, top, rec map[string]any) string {
	e.t.Helper()
	conf := testenv.BridgeConflist(name, "1.1.0", testenv.Alloc(e.t), e.dataDir, e.recorder(name, "1.1.0", rec))
	if len(top) == 0 {
		return conf
	}
	var m map[string]any
	require.NoError(e.t, json.Unmarshal([]byte(conf), &m))
	for k, v := range top {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(e.t, err)
	return string(b)
}

// setUp attaches pod and fails the test on error.
func (e *itEnv) setUp(pod PodNetwork) []NetResult {
	e.t.Helper()
	res, err := e.m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(e.t, err)
	return res
}

// callsFor returns the recorded calls of verb for one container.
func (e *itEnv) callsFor(verb, id string) []calllog.Call {
	e.t.Helper()
	var out []calllog.Call
	for _, c := range e.calls(verb) {
		if c.ContainerID == id {
			out = append(out, c)
		}
	}
	return out
}

// networksFor lists the networks of the recorded calls of verb for one
// container.
func (e *itEnv) networksFor(verb, id string) []string {
	e.t.Helper()
	var out []string
	for _, c := range e.callsFor(verb, id) {
		out = append(out, c.Network)
	}
	return out
}

// orderFiles lists everything in the attachment order directory.
func (e *itEnv) orderFiles() []string {
	e.t.Helper()
	des, err := os.ReadDir(filepath.Join(e.cacheDir, "ocicni", "attachments"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(e.t, err)
	var out []string
	for _, d := range des {
		// Spares are kept for reuse, bounded: not a pod's. A record's links
		// to its saved configs go with it, which the leftover scan checks.
		if !cache.IsSpareFile(d.Name()) && !cache.IsConfigLink(d.Name()) {
			out = append(out, d.Name())
		}
	}
	return out
}

// dropSavedConfigs removes every saved config and every record's link to
// one, as if the records had been written by an earlier version.
func (e *itEnv) dropSavedConfigs() {
	e.t.Helper()
	require.NoError(e.t, os.RemoveAll(filepath.Join(e.cacheDir, "ocicni", "configs")))
	links, err := filepath.Glob(filepath.Join(e.cacheDir, "ocicni", "attachments", ".cfg.*"))
	require.NoError(e.t, err)
	for _, l := range links {
		require.NoError(e.t, os.Remove(l))
	}
}

// cacheName is the base name of the cache entry of an attachment.
func (e *itEnv) cacheName(network string, pod PodNetwork, ifname string) string {
	return filepath.Base(e.cachePath(network, pod, ifname))
}

// stdinValidAttachments returns what a GC call received as valid
// attachments. A missing key or a null fails: the spec requires the array,
// even when it is empty.
func stdinValidAttachments(t *testing.T, c calllog.Call) []any {
	t.Helper()
	require.Equal(t, "GC", c.Verb)
	v, ok := c.Stdin[validAttachmentsKey]
	require.True(t, ok, "GC stdin has %s", validAttachmentsKey)
	list, ok := v.([]any)
	require.True(t, ok, "%s is a JSON array, got %#v", validAttachmentsKey, v)
	return list
}

// gcAttachment is a types.GCAttachment as the plugin decodes it.
func gcAttachment(id, ifname string) map[string]any {
	return map[string]any{"containerID": id, "ifname": ifname}
}

// reservation turns a result CIDR into host-local's reservation file name.
func reservation(t *testing.T, cidr string) string {
	t.Helper()
	ip, _, err := net.ParseCIDR(cidr)
	require.NoError(t, err)
	return ip.String()
}

// assertDetached checks that GC took everything of a stale pod: only lo in
// its netns and no order record. Cache entries and reservations are checked
// by the callers, which know what must remain.
func (e *itEnv) assertDetached(pod PodNetwork) {
	e.t.Helper()
	assert.Equal(e.t, []string{"lo"}, linksIn(e.t, pod.NetNS), "only lo is left in %s's netns", pod.Name)
	e.assertNoOrder(pod)
}

func (e *itEnv) assertNoOrder(pod PodNetwork) {
	e.t.Helper()
	order, err := e.m.diskCache().ReadOrder(pod.ID)
	require.NoError(e.t, err)
	assert.Nil(e.t, order, "order record of %s", pod.Name)
}

func TestGCReleasesStalePods(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	fileB := e.addConf("netb", e.gcConflist("netb", nil, nil))
	m := e.start()
	require.Equal(t, "neta", m.GetDefaultNetworkName())

	p1, p2, p3 := e.pod("p1"), e.pod("p2"), e.pod("p3")
	p3.Networks = []NetAttachment{{Name: "netb"}}
	ip1 := resultIPs(t, e.setUp(p1)[0])
	require.Len(t, ip1, 1)
	e.setUp(p2)
	e.setUp(p3)
	p3.Networks = nil
	require.Len(t, testenv.Reservations(t, e.dataDir, "neta"), 2)
	require.Len(t, testenv.Reservations(t, e.dataDir, "netb"), 1)

	require.NoError(t, os.Remove(fileB))
	m = e.restart()
	require.Equal(t, []string{"neta"}, m.Networks(), "netb is no longer loaded")

	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&p1}))

	// Stale pods: p2 on the default network, p3 on the removed network,
	// deleted with its cached config.
	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", p2.ID))
	assert.Equal(t, []string{"netb"}, e.networksFor("DEL", p3.ID))
	e.assertDetached(p2)
	e.assertDetached(p3)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "netb"))

	// The valid pod keeps everything.
	assert.Empty(t, e.callsFor("DEL", p1.ID))
	assert.Equal(t, []string{reservation(t, ip1[0])}, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Equal(t, []string{e.cacheName("neta", p1, "eth0")}, e.cacheFiles())
	assert.Equal(t, ip1, testenv.AddrsIn(t, p1.NetNS, "eth0"))
	assert.Equal(t, []string{p1.ID}, e.orderFiles())

	// Only the loaded 1.1.0 network gets the GC verb, with exactly p1's
	// attachment as valid.
	gcs := e.calls("GC")
	require.Len(t, gcs, 1)
	assert.Equal(t, "neta", gcs[0].Network)
	assert.Equal(t, []any{gcAttachment(p1.ID, "eth0")}, stdinValidAttachments(t, gcs[0]))

	// And the pod still passes CHECK.
	res, err := m.GetPodNetworkStatusWithContext(e.ctx(), p1)
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, ip1, resultIPs(t, res[0]))
	assert.Equal(t, []string{"neta"}, e.networksFor("CHECK", p1.ID))
}

func TestGCDisableGCHonoured(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("quiet", e.gcConflist("quiet", map[string]any{"disableGC": true}, nil))
	e.addConf("loud", e.gcConflist("loud", nil, nil))
	m := e.start()
	require.True(t, m.e.snapshot().Network("quiet").List.DisableGC, "the fixture sets disableGC")

	valid, stale := e.pod("valid"), e.pod("stale")
	ip := resultIPs(t, e.setUp(valid)[0])
	e.setUp(stale)

	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&valid}))

	// disableGC stops the GC verb only (see Manager.GC): ocicni's own pass
	// still deletes the stale attachment with its cached config.
	assert.Equal(t, []string{"loud"}, e.callNetworks("GC"), "no GC verb for the disableGC network")
	assert.Equal(t, []string{"quiet"}, e.networksFor("DEL", stale.ID))
	e.assertDetached(stale)
	assert.Equal(t, []string{reservation(t, ip[0])}, testenv.Reservations(t, e.dataDir, "quiet"))
	assert.Equal(t, ip, testenv.AddrsIn(t, valid.NetNS, "eth0"))
	assert.Equal(t, []string{e.cacheName("quiet", valid, "eth0")}, e.cacheFiles())
}

// Upstream ocicni took a valid pod without Networks to be on the current
// default network, so GC deleted its attachment once another network
// became the default.
func TestGCKeepsValidPodOnNonDefaultNetwork(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	e.start()
	v, stale := e.pod("v"), e.pod("stale")
	ip := resultIPs(t, e.setUp(v)[0])
	e.setUp(stale)

	// A file that sorts before neta's makes netb the default.
	testenv.WriteFile(t, e.confDir, "00-netb.conflist", e.gcConflist("netb", nil, nil))
	m := e.restart()
	require.Equal(t, "netb", m.GetDefaultNetworkName())

	require.NoError(t, m.GC(e.ctx(), []*PodNetwork{&v}))

	assert.Empty(t, e.callsFor("DEL", v.ID), "v's attachment on neta is not deleted")
	assert.Equal(t, ip, testenv.AddrsIn(t, v.NetNS, "eth0"))
	assert.Equal(t, []string{reservation(t, ip[0])}, testenv.Reservations(t, e.dataDir, "neta"))
	assert.Equal(t, []string{e.cacheName("neta", v, "eth0")}, e.cacheFiles())
	assert.Equal(t, []string{"neta"}, e.networksFor("DEL", stale.ID), "GC still collects on neta")
	e.assertDetached(stale)

	byNet := map[string][]any{}
	for _, c := range e.calls("GC") {
		byNet[c.Network] = stdinValidAttachments(t, c)
	}
	// v names no networks, so the current default protects it on eth0 as
	// well: listing more can only protect more.
	assert.Equal(t, map[string][]any{
		"neta": {gcAttachment(v.ID, "eth0")},
		"netb": {gcAttachment(v.ID, "eth0")},
	}, byNet)
}

func TestGCDoesNotModifyValidPods(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("neta", e.gcConflist("neta", nil, nil))
	m := e.start()
	running := e.pod("running")
	e.setUp(running)

	build := func() []*PodNetwork {
		annotations := map[string]string{"a": "b"}
		return []*PodNetwork{
			{Name: running.Name, Namespace: running.Namespace, UID: running.UID, ID: running.ID, NetNS: running.NetNS},
			{
				Name: "named", Namespace: "test", UID: "uid-named", ID: "ctr-named", NetNS: "/run/netns/named",
				Networks: []NetAttachment{{Name: "neta"}, {Name: "netb", Ifname: "net1"}, {Name: "netc"}},
				RuntimeConfig: map[string]RuntimeConfig{"neta": {
					IP: "10.1.2.3", PortMappings: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
					Bandwidth: &BandwidthConfig{IngressRate: 1}, PodAnnotations: &annotations,
				}},
				Aliases: map[string][]string{"neta": {"alias"}},
			},
			{Name: "empty", Namespace: "test", ID: "ctr-empty", Networks: []NetAttachment{}},
			nil,
		}
	}
	valid, want := build(), build()
	ptrs := append([]*PodNetwork(nil), valid...)
	networks := valid[1].Networks

	require.NoError(t, m.GC(e.ctx(), valid))

	assert.Equal(t, want, valid, "GC must not modify the pods")
	for i := range valid {
		assert.Same(t, ptrs[i], valid[i], "GC must not replace element %d", i)
	}
	assert.Equal(t, []NetAttachment{{Name: "neta"}, {Name: "netb", Ifname: "net1"}, {Name: "netc"}}, networks,
		"the Networks backing array keeps its empty ifnames")

	// The pods were used: the cached attachment, the named one, and the
	// default network for the pod that names none.
	gcs := e.calls("GC")
	require.Len(t, gcs, 1)
	assert.ElementsMatch(t, []any{
		gcAttachment(running.ID, "eth0"), gcAttachment("ctr-named", "eth0"),
		gcAttachment("ctr-empty", "eth0"),
	}, stdinValidAttachments(t, gcs[0]))
	assert.Empty(t, e.calls("DEL"))
	assert.NotNil(t, testenv.AddrsIn(t, running.NetNS, "eth0"))
}

func TestGCNeverPassesNilValidAttachments(t *testing.T) {
	t.Parallel()
	for name, valid := range map[string][]*PodNetwork{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.addConf("neta", e.gcConflist("neta", nil, nil))
			m := e.start()
			stale := e.pod("stale")
			e.setUp(stale)

			require.NoError(t, m.GC(e.ctx(), valid))

			gcs := e.calls("GC")
			require.Len(t, gcs, 1)
			assert.Equal(t, []any{}, stdinValidAttachments(t, gcs[0]))
			assert.Equal(t, []any{}, gcs[0].Stdin["cni.dev/attachments"], "the earlier spec draft's key too")
			e.assertClean(stale, "neta")
		})
	}
}
