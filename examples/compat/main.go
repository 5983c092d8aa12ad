// Command compat is written against cri-o/ocicni's pkg/ocicni API only, the
// way CRI-O's internal/config/cnimgr uses it. Its import of this module's
// pkg/ocicni is the only line that differs from a program written for
// github.com/cri-o/ocicni: that is what "source-compatible" means.
//
// Usage (as root):
//
//	go run ./examples/compat -conf-dir DIR -bin-dir DIR -netns /run/netns/NAME
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni" // was: github.com/cri-o/ocicni/pkg/ocicni
)

// cniManager mirrors CRI-O's cnimgr: it owns the plugin and polls its
// status until the default network is ready.
type cniManager struct {
	plugin ocicni.CNIPlugin
	ready  bool
}

func newCNIManager(defaultNetwork, networkDir, cacheDir string, pluginDirs ...string) (*cniManager, error) {
	var (
		plugin ocicni.CNIPlugin
		err    error
	)
	if cacheDir != "" {
		plugin, err = ocicni.InitCNIWithCache(defaultNetwork, networkDir, cacheDir, pluginDirs...)
	} else {
		plugin, err = ocicni.InitCNI(defaultNetwork, networkDir, pluginDirs...)
	}
	if err != nil {
		return nil, fmt.Errorf("initialize CNI plugin: %w", err)
	}
	return &cniManager{plugin: plugin}, nil
}

func (c *cniManager) waitReady(ctx context.Context) error {
	for !c.ready {
		if err := c.plugin.StatusWithContext(ctx); err == nil {
			c.ready = true
			break
		}
		select {
		case <-ctx.Done():
			return errors.New("CNI default network not ready")
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// run does what a runtime does for one sandbox: set up, read the pod IPs,
// tear down, and collect garbage.
func run(ctx context.Context, confDir, binDir, cacheDir, netnsPath string) error {
	mgr, err := newCNIManager("", confDir, cacheDir, binDir)
	if err != nil {
		return err
	}
	defer mgr.plugin.Shutdown() //nolint:errcheck // nothing to do on failure
	if err := mgr.waitReady(ctx); err != nil {
		return err
	}
	fmt.Printf("plugin %q, default network %q\n", mgr.plugin.Name(), mgr.plugin.GetDefaultNetworkName())

	annotations := map[string]string{"io.kubernetes.pod.name": "compat"}
	pod := ocicni.PodNetwork{
		Name:      "compat",
		Namespace: "default",
		ID:        fmt.Sprintf("compat%d", os.Getpid()),
		UID:       "compat-uid",
		NetNS:     netnsPath,
		Networks:  []ocicni.NetAttachment{},
		RuntimeConfig: map[string]ocicni.RuntimeConfig{
			mgr.plugin.GetDefaultNetworkName(): {
				Bandwidth:      &ocicni.BandwidthConfig{IngressRate: 1 << 20, EgressRate: 1 << 20},
				PortMappings:   []ocicni.PortMapping{{HostPort: 18080, ContainerPort: 80, Protocol: "tcp", HostIP: ""}},
				IpRanges:       [][]ocicni.IpRange{},
				CgroupPath:     "/kubepods/compat",
				PodAnnotations: &annotations,
			},
		},
	}
	results, err := mgr.plugin.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	first := results[0] // an ocicni.NetResult
	fmt.Printf("attached %s as %s (result version %s)\n", first.Name, first.Ifname, first.Result.Version())

	status, err := mgr.plugin.GetPodNetworkStatusWithContext(ctx, pod)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	fmt.Printf("status: %d attachment(s), interface %s\n", len(status), ocicni.DefaultInterfaceName)

	if err := mgr.plugin.TearDownPodWithContext(ctx, pod); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	if err := mgr.plugin.GC(ctx, []*ocicni.PodNetwork{}); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	fmt.Println("torn down")
	return nil
}

func main() {
	confDir := flag.String("conf-dir", ocicni.DefaultConfDir, "CNI config directory")
	binDir := flag.String("bin-dir", ocicni.DefaultBinDir, "CNI plugin directory")
	cacheDir := flag.String("cache-dir", "", "CNI cache directory (default /var/lib/cni)")
	netnsPath := flag.String("netns", "", "network namespace path")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, *confDir, *binDir, *cacheDir, *netnsPath)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(1)
	}
}
