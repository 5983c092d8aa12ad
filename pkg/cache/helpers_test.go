package cache

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/conflist"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
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

// attachment describes one ADD that libcni performs through a
// fakecni.Exec, so that libcni itself writes a genuine cache file
// without running anything: the ADD answers result.
type attachment struct {
	network, id, ifname, cniVersion, result string
}

func (a attachment) confList() []byte {
	return conflist.Build(a.network, a.cniVersion, "fake")
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
	list, err := libcni.ConfListFromBytes(a.confList())
	require.NoError(t, err)
	f := fakecni.New()
	f.Result(a.network, "ADD", a.result)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/fake"}, dir, f)
	_, err = cni.AddNetworkList(context.Background(), list, a.runtimeConf())
	require.NoError(t, err)
}

// libcniResult asks libcni for the cached result of a.
func libcniResult(t *testing.T, dir string, a attachment) (string, error) {
	t.Helper()
	list, err := libcni.ConfListFromBytes(a.confList())
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/fake"}, dir, fakecni.New())
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
