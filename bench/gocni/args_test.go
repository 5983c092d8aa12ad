package gocni

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	gocni "github.com/containerd/go-cni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
	face "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// TestArgsMatchGoCNI makes the same calls through go-cni and through the
// face, on one bridge + host-local network chained with the recorder,
// which logs the CNI_ARGS it receives, while the test process has a
// CNI_ARGS variable of its own: both sides pass exactly the caller's
// pairs, none of the process's, and a static IP given with WithArgs
// reaches host-local on both.
func TestArgsMatchGoCNI(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv("CNI_ARGS", "LEAKED=1;K8S_POD_NAME=leaked")
	n := testenv.Alloc(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "ipam")
	_, subnet, err := net.ParseCIDR(n.Subnet)
	require.NoError(t, err)
	base := subnet.IP.To4()
	static := net.IPv4(base[0], base[1], base[2], 77).String()

	tests := []struct {
		name string
		// opts builds the options of one side from its constructors.
		opts func(args func(k, v string) any, labels func(map[string]string) any) []any
		want []string // sorted CNI_ARGS pairs
		ip   string   // eth0's address, when the test fixes it
	}{
		{
			name: "no options",
			opts: func(func(string, string) any, func(map[string]string) any) []any { return nil },
			want: nil,
		},
		{
			name: "containerd's labels",
			opts: func(_ func(string, string) any, labels func(map[string]string) any) []any {
				return []any{labels(map[string]string{
					"IgnoreUnknown": "1", "K8S_POD_NAMESPACE": "ns", "K8S_POD_NAME": "web",
					"K8S_POD_INFRA_CONTAINER_ID": "c1", "K8S_POD_UID": "u1",
				})}
			},
			want: []string{"IgnoreUnknown=1", "K8S_POD_INFRA_CONTAINER_ID=c1", "K8S_POD_NAME=web", "K8S_POD_NAMESPACE=ns", "K8S_POD_UID=u1"},
		},
		{
			name: "BuildKit's hostname, and a static IP and MAC",
			opts: func(args func(string, string) any, _ func(map[string]string) any) []any {
				return []any{
					args("K8S_POD_NAME", "buildhost"), args("IgnoreUnknown", "1"),
					args("IP", static), args("MAC", "02:42:ac:11:00:4d"),
				}
			},
			want: []string{"IP=" + static, "IgnoreUnknown=1", "K8S_POD_NAME=buildhost", "MAC=02:42:ac:11:00:4d"},
			ip:   static + "/24",
		},
	}
	for i, tt := range tests {
		for _, sideName := range []string{sideGoCNI, sideFace} {
			t.Run(tt.name+"/"+sideName, func(t *testing.T) {
				logFile := filepath.Join(dir, fmt.Sprintf("calls-%d-%s.jsonl", i, sideName))
				conf := testenv.BridgeConflist("argsnet", "1.0.0", n, dataDir, testenv.RecorderConf("argsnet", "1.0.0", logFile, nil))
				id := fmt.Sprintf("gocniargs%d-%d-%s", os.Getpid(), i, sideName)
				nsPath := testenv.NewNS(t)
				up, down := argsSide(t, sideName, []byte(conf), filepath.Join(dir, "cache-"+sideName), tt.opts)
				ctx := context.Background()
				t.Cleanup(func() { removeGoCNIEntries(id) }) // also when up fails half-way
				require.NoError(t, up(ctx, id, nsPath))
				if tt.ip != "" {
					assert.Equal(t, []string{tt.ip}, testenv.AddrsIn(t, nsPath, "eth0"), "the static IP is eth0's")
				}
				require.NoError(t, down(ctx, id, nsPath))
				assert.Empty(t, testenv.Reservations(t, dataDir, "argsnet"), "the reservation is released")

				calls, err := calllog.Read(logFile)
				require.NoError(t, err)
				for _, verb := range []string{"ADD", "DEL"} {
					got := calllog.Filter(calls, verb)
					require.Len(t, got, 1, verb)
					assert.Equal(t, tt.want, sortedPairs(got[0].Args), "%s's CNI_ARGS", verb)
				}
			})
		}
	}
}

// argsSide returns the up and down of one side, New and Load as
// BuildKit's cniprovider calls them (the loopback network, then one
// config list; interfaces lo and eth0 with prefix "eth" and the list
// first), with the options opts builds from that side's constructors.
func argsSide(t *testing.T, name string, conf []byte, cacheDir string,
	opts func(args func(k, v string) any, labels func(map[string]string) any) []any,
) (up, down func(ctx context.Context, id, nsPath string) error) {
	t.Helper()
	if name == sideGoCNI {
		g, err := gocni.New(gocni.WithPluginDir([]string{pluginDir}), gocni.WithInterfacePrefix("eth"),
			gocni.WithMinNetworkCount(1), gocni.WithConfListBytes(conf))
		require.NoError(t, err)
		var nsOpts []gocni.NamespaceOpts
		for _, o := range opts(func(k, v string) any { return gocni.WithArgs(k, v) },
			func(l map[string]string) any { return gocni.WithLabels(l) }) {
			nsOpts = append(nsOpts, o.(gocni.NamespaceOpts))
		}
		return func(ctx context.Context, id, nsPath string) error {
				_, err := g.Setup(ctx, id, nsPath, nsOpts...)
				return err
			}, func(ctx context.Context, id, nsPath string) error {
				return g.Remove(ctx, id, nsPath, nsOpts...)
			}
	}
	c, err := face.New(face.WithPluginDir([]string{pluginDir}), face.WithInterfacePrefix("eth"),
		face.WithMinNetworkCount(1), face.WithConfListBytes(conf),
		face.WithEngineOptions(ocicni.WithCacheDir(cacheDir), ocicni.WithoutHealing()))
	require.NoError(t, err)
	f := c.(*face.Face)
	t.Cleanup(func() { assert.NoError(t, f.Shutdown()) })
	var nsOpts []face.NamespaceOpts
	for _, o := range opts(func(k, v string) any { return face.WithArgs(k, v) },
		func(l map[string]string) any { return face.WithLabels(l) }) {
		nsOpts = append(nsOpts, o.(face.NamespaceOpts))
	}
	return func(ctx context.Context, id, nsPath string) error {
			_, err := f.Setup(ctx, id, nsPath, nsOpts...)
			return err
		}, func(ctx context.Context, id, nsPath string) error {
			return f.Remove(ctx, id, nsPath, nsOpts...)
		}
}

// sortedPairs splits a CNI_ARGS string into its pairs, sorted: go-cni
// orders them by map iteration.
func sortedPairs(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.Split(s, ";")
	sort.Strings(out)
	return out
}

// removeGoCNIEntries removes what go-cni left of id in libcni's default
// cache dir (it has no option for another): nothing, when Remove ran.
func removeGoCNIEntries(id string) {
	left, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", "*-"+id+"-*"))
	for _, p := range left {
		_ = os.Remove(p)
	}
}
