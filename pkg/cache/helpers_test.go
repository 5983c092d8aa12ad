package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
)

// newCacheFrom returns a Cache in a fresh temporary directory whose results
// directory is a copy of testdata/<fixture>.
func newCacheFrom(t *testing.T, fixture string) *Cache {
	t.Helper()
	c := New(t.TempDir())
	require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
	src := filepath.Join("testdata", fixture)
	des, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(src, de.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(c.ResultsDir(), de.Name()), data, 0o600))
	}
	return c
}

// writeResult writes raw bytes as the results file name.
func writeResult(t *testing.T, c *Cache, name string, data []byte) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(c.ResultsDir(), 0o700))
	path := filepath.Join(c.ResultsDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// entryErrors returns the *EntryError values joined in err, by base name.
// entryErrors returns a listing's corrupt files by base name.
func entryErrors(l Listing) map[string]*EntryError {
	out := map[string]*EntryError{}
	for _, ee := range l.Corrupt {
		out[filepath.Base(ee.Path)] = ee
	}
	return out
}

func entryNames(entries []*Entry) []string {
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, filepath.Base(e.Path))
	}
	return names
}

// fakeExec stands in for plugin binaries so that libcni itself writes
// genuine cache files without running anything. ADD returns the plugin
// config's "fakeResult"; every other command succeeds with no output.
type fakeExec struct{}

func (fakeExec) ExecPlugin(_ context.Context, _ string, stdin []byte, environ []string) ([]byte, error) {
	cmd := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			cmd = v
		}
	}
	switch cmd {
	case "ADD":
		var conf struct {
			FakeResult json.RawMessage `json:"fakeResult"`
		}
		if err := json.Unmarshal(stdin, &conf); err != nil {
			return nil, err
		}
		return conf.FakeResult, nil
	case "VERSION":
		return json.Marshal(version.All)
	default:
		return nil, nil
	}
}

func (fakeExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/fake/" + plugin, nil
}

func (fakeExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	var d version.PluginDecoder
	return d.Decode(jsonBytes)
}

// attachment describes one ADD that libcni performs through fakeExec.
type attachment struct {
	network, id, ifname, cniVersion, result string
}

func (a attachment) confList() string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[{"type":"fake","fakeResult":%s}]}`,
		a.cniVersion, a.network, a.result)
}

func (a attachment) runtimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: a.id,
		NetNS:       "/var/run/netns/test-" + a.id,
		IfName:      a.ifname,
		Args:        [][2]string{{"IgnoreUnknown", "true"}, {"K8S_POD_NAME", "pod-" + a.id}},
		CapabilityArgs: map[string]interface{}{
			"portMappings": []interface{}{map[string]interface{}{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
		},
	}
}

// libcniAdd makes libcni run ADD for a, writing its cache file under dir.
func libcniAdd(t *testing.T, dir string, a attachment) {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(a.confList()))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/fake"}, dir, fakeExec{})
	_, err = cni.AddNetworkList(context.Background(), list, a.runtimeConf())
	require.NoError(t, err)
}

// libcniResult asks libcni for the cached result of a.
func libcniResult(t *testing.T, dir string, a attachment) (string, error) {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(a.confList()))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/fake"}, dir, fakeExec{})
	res, err := cni.GetNetworkListCachedResult(list, a.runtimeConf())
	if err != nil || res == nil {
		return "", err
	}
	data, err := json.Marshal(res)
	return string(data), err
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
