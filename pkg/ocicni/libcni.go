package ocicni

import (
	"context"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/internal/ledger"
)

// cniRunner is the engine's one door to libcni's verbs. Every call is
// behind a recover (see [guard]): a panic inside libcni, such as its
// result converters dereferencing a null in a cache file, becomes a
// *[PanicError] naming the cache entry the call may have read, instead of
// the host process's crash.
//
// withCache reads and writes libcni's cache dir; noCache points libcni at
// a dir that never exists, for the DELs of attachments whose cache entry
// the inventory did not accept (see [plan.useCache]).
type cniRunner struct {
	withCache, noCache *libcni.CNIConfig
	led                *ledger.Ledger // withCache's dir
}

func newCNIRunner(binDirs []string, led *ledger.Ledger, exec invoke.Exec) *cniRunner {
	return &cniRunner{
		withCache: libcni.NewCNIConfigWithCacheDir(binDirs, led.Dir(), exec),
		noCache:   libcni.NewCNIConfigWithCacheDir(binDirs, filepath.Join(led.Dir(), "ocicni", "no-cache"), exec),
		led:       led,
	}
}

// entryFile returns the cache entry libcni reads and writes for rt on
// list: the file a panic may have come from; "" when the names make no
// valid file name.
func (c *cniRunner) entryFile(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) string {
	if list == nil || rt == nil {
		return ""
	}
	path, err := c.led.EntryPath(list.Name, rt.ContainerID, rt.IfName)
	if err != nil {
		return ""
	}
	return path
}

func (c *cniRunner) add(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	return guard.Value("libcni ADD", "", func() (types.Result, error) { return c.withCache.AddNetworkList(ctx, list, rt) })
}

// del runs the list's DEL; libcni reads the cached result as prevResult
// and removes the entry on success only when useCache is set.
func (c *cniRunner) del(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf, useCache bool) error {
	if !useCache {
		return guard.Do("libcni DEL", "", func() error { return c.noCache.DelNetworkList(ctx, list, rt) })
	}
	return guard.Do("libcni DEL", c.entryFile(list, rt), func() error { return c.withCache.DelNetworkList(ctx, list, rt) })
}

func (c *cniRunner) check(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	return guard.Do("libcni CHECK", c.entryFile(list, rt), func() error { return c.withCache.CheckNetworkList(ctx, list, rt) })
}

func (c *cniRunner) status(ctx context.Context, list *libcni.NetworkConfigList) error {
	return guard.Do("libcni STATUS", "", func() error { return c.withCache.GetStatusNetworkList(ctx, list) })
}
