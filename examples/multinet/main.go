// Command multinet attaches one pod to two CNI networks, the way a
// container runtime does: a bridge network as the default one (eth0), with
// the portmap and bandwidth plugins chained on it, and a ptp network on
// net1. It passes port mappings and a bandwidth limit through
// PodNetwork.RuntimeConfig, prints each network's interface and IPs with
// ocicni.SandboxIPs, tears down with TearDownPodOutcomes, prints every
// outcome, and checks that nothing was left behind.
//
// Run it as root from the repository root:
//
//	make plugins
//	sudo go run ./examples/multinet -bin-dir bin/plugins
//
// -bin-dir must hold bridge, ptp, host-local, bandwidth and portmap. The
// portmap plugin needs iptables; without it, multinet says so and runs
// without portmap. Configs, cache and IPAM state live in a temporary
// directory, so /etc/cni and /var/lib/cni are not touched.
//
// The program uses only ocicni's public package pkg/ocicni. Its namespace
// and link helpers are in netns_linux.go, so it can be copied out of the
// repository into a module of its own.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

const (
	defaultNet = "multinet-bridge" // eth0
	secondNet  = "multinet-ptp"    // net1
	bridgeName = "ocicni-mn0"
)

func main() {
	binDir := flag.String("bin-dir", "", "directory holding bridge, ptp, host-local, bandwidth and portmap (\"make plugins\" builds them into bin/plugins)")
	flag.Parse()
	if *binDir == "" {
		fmt.Fprintln(os.Stderr, "multinet: pass -bin-dir; \"make plugins\" builds the reference plugins into bin/plugins")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "multinet needs root: run with sudo")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var left []string
	err := run(ctx, *binDir, &left)
	stop()
	// Every deferred cleanup in run has run now: check what is left.
	for _, name := range left {
		switch ok, lerr := linkExists(name); {
		case lerr != nil:
			err = errors.Join(err, fmt.Errorf("check interface %s: %w", name, lerr))
		case ok:
			err = errors.Join(err, fmt.Errorf("left behind: interface %s", name))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nmultinet FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\nmultinet OK: no interface of %v is left, the netns and the temporary directory are removed\n", left)
}

// run attaches a pod to both networks and detaches it. Every resource it
// creates is released by a deferred cleanup, also when a step fails. It
// appends to *hostIfaces the host-side interfaces that must be gone once
// it returns.
func run(ctx context.Context, binDir string, hostIfaces *[]string) (err error) {
	binDir, err = filepath.Abs(binDir)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "ocicni-multinet-")
	if err != nil {
		return err
	}
	defer cleanup(&err, "removed "+work, removeAndVerify(work, os.RemoveAll))
	confDir, cacheDir, dataDir := filepath.Join(work, "net.d"), filepath.Join(work, "cache"), filepath.Join(work, "ipam")

	withPortmap := true
	if _, err := exec.LookPath("iptables"); err != nil {
		withPortmap = false
		fmt.Println("NOTE: iptables is not installed: the portmap plugin needs it, so multinet runs without port mappings")
	}
	if err := writeConfigs(confDir, dataDir, withPortmap); err != nil {
		return err
	}

	// The bridge plugin creates the bridge on first use and never deletes it.
	*hostIfaces = append(*hostIfaces, bridgeName)
	defer cleanup(&err, "deleted bridge "+bridgeName, func() error { return deleteLink(bridgeName) })

	nsPath, err := newNetNS("ocicni-multinet-" + randomHex(4))
	if err != nil {
		return err
	}
	defer cleanup(&err, "removed netns "+nsPath, removeAndVerify(nsPath, removeNetNS))

	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := ocicni.New(
		ocicni.WithConfDir(confDir),
		ocicni.WithBinDirs(binDir),
		ocicni.WithCacheDir(cacheDir),
		ocicni.WithLogger(logrus.NewEntry(logger)),
	)
	if err != nil {
		return err
	}
	defer cleanup(&err, "shut down the manager", m.Shutdown)

	pod := ocicni.PodNetwork{
		Name:      "multinet",
		Namespace: "default",
		ID:        "multinet-" + randomHex(6),
		UID:       randomHex(16),
		NetNS:     nsPath,
		Networks: []ocicni.NetAttachment{
			{Name: defaultNet, Ifname: "eth0"},
			{Name: secondNet, Ifname: "net1"},
		},
		// Keyed by network: libcni passes each capability only to the
		// plugins of that network that declare it.
		RuntimeConfig: map[string]ocicni.RuntimeConfig{
			defaultNet: {
				PortMappings: []ocicni.PortMapping{{HostPort: 18080, ContainerPort: 80, Protocol: "tcp"}},
				Bandwidth: &ocicni.BandwidthConfig{
					IngressRate: 10_000_000, IngressBurst: 1_000_000, // bits/s, bits
					EgressRate: 10_000_000, EgressBurst: 1_000_000,
				},
			},
		},
	}

	fmt.Printf("Setting up pod %s/%s (sandbox %s) in %s\n", pod.Namespace, pod.Name, pod.ID, nsPath)
	results, err := m.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return fmt.Errorf("set up pod: %w", err) // already rolled back
	}
	tornDown := false
	defer func() {
		if !tornDown { // a step failed: tear down under a fresh context
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cleanup(&err, "tore down the pod", func() error { return m.TearDownPodWithContext(tctx, pod) })
		}
	}()

	if err := printResults(results, hostIfaces); err != nil {
		return err
	}

	fmt.Println("Tearing down")
	tornDown = true
	outcomes, err := m.TearDownPodOutcomes(ctx, pod)
	printOutcomes(outcomes)
	if err != nil {
		return fmt.Errorf("tear down pod: %w", err)
	}
	return nil
}

// printResults prints each network's interface and IPs, and appends to
// *hostIfaces the host-side interfaces of each result, so that main can
// check they are gone even when a later result fails.
func printResults(results []ocicni.NetResult, hostIfaces *[]string) error {
	for _, r := range results {
		iface, ips, err := ocicni.SandboxIPs(r)
		if err != nil {
			return err
		}
		fmt.Printf("  network %-16s interface %s (mac %s)\n", r.Name, iface.Name, iface.Mac)
		for _, ip := range ips {
			fmt.Printf("    ip %-18s gateway %v\n", ip.Address.String(), ip.Gateway)
		}
		host, err := hostSide(r)
		if err != nil {
			return err
		}
		*hostIfaces = append(*hostIfaces, host...)
	}
	return nil
}

// printOutcomes prints one line per network of a teardown: its class
// (deleted, already-gone, failed, ...) and, when it failed, why.
func printOutcomes(outcomes []ocicni.Outcome) {
	for _, o := range outcomes {
		fmt.Printf("  %-16s %-5s %s", o.Network, o.IfName, o.Class)
		if o.Err != nil {
			fmt.Printf(": %v", o.Err)
		}
		fmt.Println()
	}
}

// hostSide returns the host-side interfaces in a result (veths, and the
// ifb device of bandwidth), leaving out the bridge, which cleanup deletes.
func hostSide(r ocicni.NetResult) ([]string, error) {
	res, err := current.NewResultFromResult(r.Result)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", r.Name, err)
	}
	var names []string
	for _, i := range res.Interfaces {
		if i.Sandbox == "" && i.Name != bridgeName {
			names = append(names, i.Name)
		}
	}
	return names, nil
}

// writeConfigs writes the two network config lists. The default network
// is the one whose file sorts first.
func writeConfigs(confDir, dataDir string, withPortmap bool) error {
	ipam := func(subnet string) map[string]any {
		return map[string]any{
			"type":    "host-local",
			"dataDir": dataDir,
			"ranges":  [][]map[string]string{{{"subnet": subnet}}},
		}
	}
	first := []any{
		map[string]any{"type": "bridge", "bridge": bridgeName, "isGateway": true, "ipam": ipam("10.250.78.0/24")},
		map[string]any{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
	}
	if withPortmap {
		first = append(first, map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}})
	}
	second := []any{
		map[string]any{"type": "ptp", "ipam": ipam("10.250.79.0/24")},
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	for file, conf := range map[string]map[string]any{
		"10-" + defaultNet + ".conflist": {"cniVersion": "1.0.0", "name": defaultNet, "plugins": first},
		"20-" + secondNet + ".conflist":  {"cniVersion": "1.0.0", "name": secondNet, "plugins": second},
	} {
		data, err := json.MarshalIndent(conf, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(confDir, file), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// removeAndVerify returns a cleanup that removes path with remove and then
// checks that path is gone: a remove that reports success but leaves the
// path behind is a leftover too.
func removeAndVerify(path string, remove func(string) error) func() error {
	return func() error {
		if err := remove(path); err != nil {
			return err
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s still exists", path)
		}
		return nil
	}
}

// cleanup runs fn and, if it fails, adds its error to *errp. It is meant
// for defer.
func cleanup(errp *error, done string, fn func() error) {
	if err := fn(); err != nil {
		*errp = errors.Join(*errp, fmt.Errorf("cleanup: %w", err))
		fmt.Printf("  cleanup FAILED: %v\n", err)
		return
	}
	fmt.Printf("  cleanup: %s\n", done)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
