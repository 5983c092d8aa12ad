package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

// TestBadInputRunsNoPlugin checks that every rejected request names the
// offending field and runs no plugin, and that no file is written.
func TestBadInputRunsNoPlugin(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("rec", e.recorder("rec", "1.0.0", nil))
	e.addConf("missingbin", `{"cniVersion":"1.0.0","name":"missingbin","plugins":[{"type":"recorder"},{"type":"no-such-plugin"}]}`)
	m := e.start()
	good := e.pod("good")

	tests := []struct {
		name    string
		mutate  func(p *PodNetwork)
		want    error
		field   string
		mention []string
	}{
		{name: "empty container ID", mutate: func(p *PodNetwork) { p.ID = "" }, want: ErrInvalidArgument, field: "container ID"},
		{name: "ID with traversal", mutate: func(p *PodNetwork) { p.ID = "../../etc" }, want: ErrInvalidArgument, field: "container ID"},
		{name: "ID with control char", mutate: func(p *PodNetwork) { p.ID = "abc\x7f" }, want: ErrInvalidArgument, field: "container ID"},
		{name: "relative netns", mutate: func(p *PodNetwork) { p.NetNS = "run/netns/x" }, want: ErrInvalidArgument, field: "netns path"},
		{name: "missing netns", mutate: func(p *PodNetwork) { p.NetNS = "/run/netns/does-not-exist" }, want: ErrInvalidArgument, field: "netns path"},
		{name: "bad static IP", mutate: func(p *PodNetwork) { p.RuntimeConfig = map[string]RuntimeConfig{"rec": {IP: "1.2.3"}} }, want: ErrInvalidArgument, mention: []string{"1.2.3"}},
		{name: "bad static MAC", mutate: func(p *PodNetwork) { p.RuntimeConfig = map[string]RuntimeConfig{"rec": {MAC: "nope"}} }, want: ErrInvalidArgument, mention: []string{"MAC"}},
		{
			name: "duplicate ifnames", want: ErrInvalidArgument, field: "interface name",
			mutate: func(p *PodNetwork) {
				p.Networks = []NetAttachment{{Name: "rec", Ifname: "x0"}, {Name: "rec", Ifname: "x0"}}
			},
		},
		{
			name: "hostile ifname", want: ErrInvalidArgument, field: "interface name",
			mutate: func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: "rec", Ifname: "../eth0"}} },
		},
		{
			name: "hostile network name", want: ErrInvalidArgument, field: "network name",
			mutate: func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: "a/../../b"}} },
		},
		// Lengths are bounded before any plugin runs, so that libcni's
		// cache file name fits NAME_MAX (see cache.MaxContainerIDLen).
		{name: "250-byte ID", mutate: func(p *PodNetwork) { p.ID = strings.Repeat("a", 250) }, want: ErrInvalidArgument, field: "container ID"},
		{name: "10 kB ID", mutate: func(p *PodNetwork) { p.ID = strings.Repeat("a", 10<<10) }, want: ErrInvalidArgument, field: "container ID"},
		{name: "10 kB pod name", mutate: func(p *PodNetwork) { p.Name = strings.Repeat("n", 10<<10) }, want: ErrInvalidArgument, field: "pod name"},
		{name: "10 kB namespace", mutate: func(p *PodNetwork) { p.Namespace = strings.Repeat("n", 10<<10) }, want: ErrInvalidArgument, field: "pod namespace"},
		{name: "10 kB UID", mutate: func(p *PodNetwork) { p.UID = strings.Repeat("u", 10<<10) }, want: ErrInvalidArgument, field: "pod UID"},
		{name: "10 kB netns path", mutate: func(p *PodNetwork) { p.NetNS = "/" + strings.Repeat("n", 10<<10) }, want: ErrInvalidArgument, field: "netns path"},
		{name: "thread-self netns", mutate: func(p *PodNetwork) { p.NetNS = "/proc/thread-self/ns/net" }, want: ErrInvalidArgument, field: "netns path"},
		{name: "self netns", mutate: func(p *PodNetwork) { p.NetNS = "/proc/self/ns/net" }, want: ErrInvalidArgument, field: "netns path"},
		{
			name: "16-byte ifname", want: ErrInvalidArgument, field: "interface name",
			mutate: func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: "rec", Ifname: "eth0123456789abc"}} },
		},
		{
			name: "101-byte network name", want: ErrInvalidArgument, field: "network name",
			mutate: func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: strings.Repeat("n", 101)}} },
		},
		{name: "CNI_ARGS injection via name", mutate: func(p *PodNetwork) { p.Name = "x;IP=10.0.0.5" }, want: ErrInvalidArgument, field: "pod name"},
		{name: "CNI_ARGS injection via UID", mutate: func(p *PodNetwork) { p.UID = "u=1" }, want: ErrInvalidArgument, field: "pod UID"},
		{
			name: "unknown network", want: ErrNetworkNotFound, mention: []string{`"nope"`, e.confDir},
			mutate: func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: "rec"}, {Name: "nope"}} },
		},
		{
			name: "network whose binary is missing", want: ErrPluginNotFound,
			mention: []string{"missingbin", "no-such-plugin", pluginDir, "20-missingbin.conflist"},
			mutate:  func(p *PodNetwork) { p.Networks = []NetAttachment{{Name: "missingbin"}} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := good
			tt.mutate(&pod)
			_, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.ErrorIs(t, err, tt.want)
			if tt.field != "" {
				var iae *InvalidArgumentError
				require.ErrorAs(t, err, &iae)
				assert.Equal(t, tt.field, iae.Field)
			}
			for _, s := range tt.mention {
				assert.Contains(t, err.Error(), s)
			}
			assert.Empty(t, e.calls(""), "no plugin ran")
			assert.Empty(t, e.cacheFiles(), "no cache entry")
			_, serr := os.Stat(filepath.Join(e.cacheDir, "ocicni"))
			require.ErrorIs(t, serr, os.ErrNotExist, "no order record written")
		})
	}

	// Teardown and status reject hostile IDs before touching anything.
	for _, id := range []string{"", "../x", "a/b", "a\nb", strings.Repeat("a", 10<<10)} {
		err := m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: id})
		require.ErrorIs(t, err, ErrInvalidArgument, "%.20q", id)
		_, err = m.GetPodNetworkStatusWithContext(e.ctx(), PodNetwork{ID: id, NetNS: good.NetNS})
		require.ErrorIs(t, err, ErrInvalidArgument, "%q", id)
	}
	assert.Empty(t, e.calls(""))
}

func TestNoDefaultNetworkError(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	m := e.start()
	_, err := m.SetUpPodWithContext(e.ctx(), e.pod("p"))
	require.ErrorIs(t, err, ErrNoDefaultNetwork)
	assert.Contains(t, err.Error(), e.confDir)
	require.ErrorIs(t, m.Status(), ErrNoDefaultNetwork)
}

// An already cancelled context runs nothing: no lo, no order record, no
// plugin, no rollback.
func TestCancelledContextRunsNothing(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.addConf("rec", e.recorder("rec", "1.0.0", nil))
	m := e.start()
	pod := e.pod("p")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := m.SetUpPodWithContext(ctx, pod)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, e.calls(""), "no plugin ran")
	assert.Empty(t, e.orderFiles())
	assert.Empty(t, e.cacheFiles())
	assert.Equal(t, []string{"lo"}, linksIn(t, pod.NetNS))
	assert.False(t, loUp(t, pod.NetNS), "lo was not brought up")
}

func loUp(t *testing.T, nsPath string) bool {
	t.Helper()
	return netns.LoopbackCheck(nsPath) == nil
}
