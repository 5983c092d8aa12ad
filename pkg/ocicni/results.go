package ocicni

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/seed-671fdd43/ocicni/internal/guard"
)

// STATUS error codes from the CNI 1.1 spec, as libcni's types package
// defines them.
const (
	// ErrCodePluginNotAvailable means the plugin cannot serve ADD
	// requests.
	ErrCodePluginNotAvailable = types.ErrPluginNotAvailable
	// ErrCodeLimitedConnectivity means the plugin cannot serve ADD
	// requests, and existing pods may have limited connectivity.
	ErrCodeLimitedConnectivity = types.ErrLimitedConnectivity
)

// ErrNoSandboxInterface means a result names no interface inside the
// sandbox and carries no IP that could belong to one.
var ErrNoSandboxInterface = errors.New("ocicni: result has no sandbox interface or IP")

// SandboxIPs picks, from a network's result, the interface inside the
// sandbox and the IPs assigned to it. It accepts results of every version,
// results that also list host-side interfaces, IPs without an interface
// index (delegated IPAM) and results with no interfaces at all (CNI 0.2.0).
// iface is nil when the result lists no sandbox interface. An empty result
// yields ErrNoSandboxInterface.
func SandboxIPs(r NetResult) (iface *types100.Interface, ips []*types100.IPConfig, err error) {
	if r.Result == nil {
		return nil, nil, ErrNoSandboxInterface
	}
	cur, err := guard.Value("libcni result conversion", "", func() (*types100.Result, error) {
		return types100.NewResultFromResult(r.Result)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ocicni: converting %s result of network %q: %w", r.Result.Version(), r.Name, err)
	}
	idx := sandboxIndex(cur.Interfaces, r.Ifname)
	if idx >= 0 {
		iface = cur.Interfaces[idx]
	}
	ips = ipsOf(cur, idx)
	if iface == nil && len(ips) == 0 {
		return nil, nil, fmt.Errorf("%w: network %q", ErrNoSandboxInterface, r.Name)
	}
	return iface, ips, nil
}

// sandboxIndex returns the index of the sandbox interface: the one named
// ifname, else the first with a sandbox, else -1.
func sandboxIndex(ifaces []*types100.Interface, ifname string) int {
	idx := -1
	for i, in := range ifaces {
		if in == nil || in.Sandbox == "" {
			continue
		}
		if idx < 0 || (in.Name == ifname && ifaces[idx].Name != ifname) {
			idx = i
		}
	}
	return idx
}

// ipsOf returns the IPs of the interface at idx, and those without a
// usable interface index, which are taken to be the sandbox's.
func ipsOf(cur *types100.Result, idx int) []*types100.IPConfig {
	var ips []*types100.IPConfig
	for _, ip := range cur.IPs {
		switch {
		case ip == nil:
		case ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(cur.Interfaces):
			ips = append(ips, ip) // no (usable) index: assume the sandbox
		case *ip.Interface == idx:
			ips = append(ips, ip)
		}
	}
	return ips
}
