package ocicnitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/libcni"

	"github.com/seed-671fdd43/ocicni/internal/conflist"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// DefaultPluginType is the plugin type of a [CacheEntry] that names none.
const DefaultPluginType = "fake"

// Conflist returns the JSON of a network configuration list named name at
// cniVersion, with one plugin per entry of plugins. An entry that starts
// with "{" is taken as that plugin's whole JSON config (to add
// capabilities or plugin keys); any other is a plugin type.
func Conflist(name, cniVersion string, plugins ...string) []byte {
	return conflist.Build(name, cniVersion, plugins...)
}

// WriteConflist writes [Conflist](name, cniVersion, plugins...) into the
// conf dir dir and returns the file's path. The file is named
// NN-<name>.conflist, NN being one more than the highest two-digit prefix
// in dir (10 at first), so that the network written first is the default
// one: the manager's default is the first valid file in name order.
// Writing a network again rewrites its file in place.
func WriteConflist(dir, name, cniVersion string, plugins ...string) (string, error) {
	if name == "" || name != filepath.Base(name) {
		return "", fmt.Errorf("ocicnitest: network name %q is not a plain file name", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	path, next := "", 10
	for _, e := range entries {
		n := e.Name()
		prefix, rest, ok := strings.Cut(n, "-")
		nn, err := strconv.Atoi(prefix)
		if !ok || len(prefix) != 2 || err != nil {
			continue
		}
		if rest == name+".conflist" {
			path = filepath.Join(dir, n)
		}
		next = max(next, nn+1)
	}
	if path == "" {
		if next > 99 {
			return "", fmt.Errorf("ocicnitest: no two-digit prefix left in %s", dir)
		}
		path = filepath.Join(dir, fmt.Sprintf("%02d-%s.conflist", next, name))
	}
	return path, os.WriteFile(path, Conflist(name, cniVersion, plugins...), 0o644)
}

// CacheEntry describes a libcni cache entry for [WriteCacheEntry].
type CacheEntry struct {
	Network     string // required
	ContainerID string // required
	IfName      string // default "eth0"
	// NetNS is the netns path recorded at ADD; it may be "" or name a
	// file that no longer exists.
	NetNS string
	// Config is the network config list that ADD used, which teardown and
	// GC run DEL with. Its name must be Network. By default it is
	// [Conflist](Network, CNIVersion, PluginTypes...).
	Config      []byte
	CNIVersion  string   // default "1.0.0"; ignored with Config
	PluginTypes []string // default [DefaultPluginType]; ignored with Config
	// Args are the CNI_ARGS of the ADD, such as K8S_POD_NAME.
	Args map[string]string
	// Result is the ADD result as a plugin prints it. By default it is
	// a [FakeExec]'s default ADD result, from [DefaultSubnet].
	Result string
}

// WriteCacheEntry writes the libcni cache entry that an ADD of e would
// have left in cacheDir, as libcni itself writes it: it runs libcni's
// AddNetworkList against a private [FakeExec], so no plugin runs and
// nothing else is recorded. It returns the entry's path. Use it to
// prepare a teardown from the cache or a GC of an attachment that no pod
// owns any more, for example one whose network's config file is gone. By
// default GC collects such an entry only when [WriteOrder] records it or
// its network is loaded (see ocicni.WithGCAllNetworks).
func WriteCacheEntry(cacheDir string, e CacheEntry) (string, error) {
	if e.IfName == "" {
		e.IfName = "eth0"
	}
	if e.CNIVersion == "" {
		e.CNIVersion = "1.0.0"
	}
	if len(e.PluginTypes) == 0 {
		e.PluginTypes = []string{DefaultPluginType}
	}
	if e.Config == nil {
		e.Config = Conflist(e.Network, e.CNIVersion, e.PluginTypes...)
	}
	name, err := cache.FileName(e.Network, e.ContainerID, e.IfName)
	if err != nil {
		return "", err
	}
	list, err := libcni.NetworkConfFromBytes(e.Config)
	if err != nil {
		return "", fmt.Errorf("ocicnitest: cache entry config: %w", err)
	}
	if list.Name != e.Network {
		return "", fmt.Errorf("ocicnitest: cache entry config is named %q, not %q", list.Name, e.Network)
	}
	fx := NewFakeExec()
	if e.Result != "" {
		fx.Result(e.Network, "ADD", e.Result)
	}
	rt := &libcni.RuntimeConf{ContainerID: e.ContainerID, NetNS: e.NetNS, IfName: e.IfName}
	keys := make([]string, 0, len(e.Args))
	for k := range e.Args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rt.Args = append(rt.Args, [2]string{k, e.Args[k]})
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/ocicnitest/bin"}, cacheDir, fx)
	if _, err := cni.AddNetworkList(context.Background(), list, rt); err != nil {
		return "", fmt.Errorf("ocicnitest: writing cache entry: %w", err)
	}
	return filepath.Join(cache.New(cacheDir).ResultsDir(), name), nil
}

// WriteOrder writes the attachment order record of containerID in
// cacheDir, as setup writes it before its first ADD, through package
// cache. A record without a cache entry stands for an ADD that never
// finished; teardown and GC delete its attachments too.
func WriteOrder(cacheDir, containerID string, atts ...cache.Attachment) error {
	return cache.New(cacheDir).WriteOrder(containerID, atts)
}
