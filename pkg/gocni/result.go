package cni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// IPConfig is one address of an interface and its gateway.
type IPConfig struct {
	IP      net.IP
	Gateway net.IP
}

// Config is what the results say of one interface.
type Config struct {
	IPConfigs  []*IPConfig
	Mac        string
	Sandbox    string
	PciID      string
	SocketPath string
}

// Result is the combined result of a Setup:
//
//   - Interfaces, keyed by name, with each interface's MAC, sandbox and
//     addresses. It always holds prefix+0 (eth0), empty when no plugin
//     reported it; an address that names no interface belongs to it.
//   - DNS, one entry per network, in order.
//   - Routes, every network's routes, in order.
//
// The loopback network, when loaded, contributes lo.
type Result struct {
	Interfaces map[string]*Config
	DNS        []types.DNS
	Routes     []*types.Route
	raw        []*types100.Result
}

// Raw returns each network's result, in network order, at CNI 1.0.0.
func (r *Result) Raw() []*types100.Result { return r.raw }

// GetCNIResultFromResults combines per-network results as Setup does.
//
// Deprecated: kept for source compatibility with go-cni's concrete type.
func (f *Face) GetCNIResultFromResults(results []*types100.Result) (*Result, error) {
	f.mu.RLock()
	prefix := f.cfg.prefix
	f.mu.RUnlock()
	return combine(prefix, results)
}

// combine builds a Result from per-network results.
func combine(prefix string, results []*types100.Result) (*Result, error) {
	def := prefix + "0"
	r := &Result{Interfaces: map[string]*Config{def: {}}, raw: results}
	for _, res := range results {
		for _, in := range res.Interfaces {
			if in == nil {
				continue
			}
			r.Interfaces[in.Name] = &Config{Mac: in.Mac, Sandbox: in.Sandbox, PciID: in.PciID, SocketPath: in.SocketPath}
		}
		for _, ip := range res.IPs {
			if ip == nil {
				return nil, fmt.Errorf("nil IP configuration: %w", ErrInvalidResult)
			}
			name := def
			if ip.Interface != nil {
				i := *ip.Interface
				if i < 0 || i >= len(res.Interfaces) || res.Interfaces[i] == nil {
					return nil, fmt.Errorf("IP %s names interface %d of %d: %w", ip.Address.String(), i, len(res.Interfaces), ErrInvalidResult)
				}
				name = res.Interfaces[i].Name
			}
			r.Interfaces[name].IPConfigs = append(r.Interfaces[name].IPConfigs, &IPConfig{IP: ip.Address.IP, Gateway: ip.Gateway})
		}
		r.DNS = append(r.DNS, res.DNS)
		r.Routes = append(r.Routes, res.Routes...)
	}
	return r, nil
}

// networkResults orders the engine's results as nets, converting each to
// CNI 1.0.0, with the loopback network's result as its plugin would give
// it.
func networkResults(nets []*Network, got []ocicni.NetResult, netnsPath string) ([]*types100.Result, error) {
	type key struct{ name, ifname string }
	byAtt := make(map[key]types.Result, len(got))
	for _, g := range got {
		byAtt[key{g.Name, g.Ifname}] = g.Result
	}
	out := make([]*types100.Result, 0, len(nets))
	for _, n := range nets {
		if n.loopback {
			out = append(out, loopbackResult(netnsPath))
			continue
		}
		res, ok := byAtt[key{n.config.Name, n.ifName}]
		if !ok {
			return nil, fmt.Errorf("no result for network %q on %s: %w", n.config.Name, n.ifName, ErrNotFound)
		}
		if res == nil {
			out = append(out, &types100.Result{CNIVersion: types100.ImplementedSpecVersion})
			continue
		}
		cur, err := guard.Value("libcni result conversion", "", func() (*types100.Result, error) {
			return types100.NewResultFromResult(res)
		})
		if err != nil {
			return nil, fmt.Errorf("network %q: %w: %w", n.config.Name, err, ErrInvalidResult)
		}
		out = append(out, cur)
	}
	return out, nil
}

// loopbackResult is what the loopback plugin reports: lo, in the sandbox,
// with 127.0.0.1/8 and ::1/128.
func loopbackResult(netnsPath string) *types100.Result {
	return &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{{Name: "lo", Mac: "00:00:00:00:00:00", Sandbox: netnsPath}},
		IPs: []*types100.IPConfig{
			{Interface: types100.Int(0), Address: net.IPNet{IP: net.IPv4(127, 0, 0, 1).To4(), Mask: net.CIDRMask(8, 32)}},
			{Interface: types100.Int(0), Address: net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)}},
		},
	}
}
