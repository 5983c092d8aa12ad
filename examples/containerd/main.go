// Command containerd is written against go-cni's API, the way containerd's
// CRI plugin uses it (internal/cri/server): New per runtime handler, Load
// with the loopback network and the default conf, Setup with labels and
// capabilities, pod IPs from Result.Interfaces["eth0"], Remove at stop.
// Its import of this module's pkg/gocni is the only line that differs from
// a program written for github.com/containerd/go-cni.
//
// Usage (as root):
//
//	go run ./examples/containerd -conf-dir DIR -bin-dir DIR -netns /run/netns/NAME
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	cni "github.com/seed-671fdd43/ocicni/pkg/gocni" // was: github.com/containerd/go-cni

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

const defaultIfName = "eth0"

func run(ctx context.Context, confDir, binDir, netns, id string) error {
	netPlugin, err := cni.New(
		cni.WithMinNetworkCount(2), // loopback + one network
		cni.WithPluginConfDir(confDir),
		cni.WithPluginMaxConfNum(1),
		cni.WithPluginDir([]string{binDir}),
	)
	if err != nil {
		return fmt.Errorf("initialize cni: %w", err)
	}
	// containerd's conf syncer calls Load on every change of the conf dir.
	if err := netPlugin.Load(cni.WithLoNetwork, cni.WithDefaultConf); err != nil {
		return fmt.Errorf("load cni config: %w", err)
	}
	if err := netPlugin.Status(); err != nil {
		return fmt.Errorf("cni not ready: %w", err)
	}

	result, err := netPlugin.Setup(ctx, id, netns,
		cni.WithLabels(map[string]string{
			"K8S_POD_NAMESPACE": "default", "K8S_POD_NAME": "example",
			"K8S_POD_INFRA_CONTAINER_ID": id, "K8S_POD_UID": "example-uid",
			"IgnoreUnknown": "1",
		}),
		cni.WithCapabilityPortMap([]cni.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}}),
	)
	if err != nil {
		var setupErr *ocicni.SetupError
		if errors.As(err, &setupErr) {
			return fmt.Errorf("setup failed and was rolled back: %w", err)
		}
		return fmt.Errorf("setup: %w", err)
	}
	if configs, ok := result.Interfaces[defaultIfName]; ok {
		for _, ip := range configs.IPConfigs {
			fmt.Printf("pod %s: %s %s (gateway %s)\n", id, defaultIfName, ip.IP, ip.Gateway)
		}
	}

	// Remove is best effort across networks; the error names every
	// network whose DEL failed.
	if err := netPlugin.Remove(ctx, id, netns); err != nil {
		var td *ocicni.TeardownError
		if errors.As(err, &td) {
			for _, o := range td.Failures() {
				fmt.Fprintf(os.Stderr, "DEL failed: network %s ifname %s: %v\n", o.Network, o.IfName, o.Err)
			}
		}
		return fmt.Errorf("remove: %w", err)
	}
	fmt.Printf("pod %s: removed\n", id)

	// Extras beyond go-cni live on the concrete type.
	if face, ok := netPlugin.(*cni.Face); ok {
		if err := face.GC(ctx, nil); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		return face.Shutdown()
	}
	return nil
}

func main() {
	confDir := flag.String("conf-dir", cni.DefaultNetDir, "CNI conf dir")
	binDir := flag.String("bin-dir", cni.DefaultCNIDir, "CNI plugin dir")
	netns := flag.String("netns", "", "network namespace path of the sandbox (required)")
	id := flag.String("id", "example-sandbox", "sandbox ID")
	flag.Parse()
	if *netns == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, *confDir, *binDir, *netns, *id)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
