package fakecni

import (
	"encoding/json"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
)

// defaultResult is the unscripted ADD answer: one interface, named after
// CNI_IFNAME, inside CNI_NETNS, with the pool's next IP, at the config's
// cniVersion (1.0.0 when it has none, or when the result cannot be
// converted to it).
func defaultResult(c Call, p *pool) ([]byte, error) {
	ip, gw, err := p.take()
	if err != nil {
		return nil, err
	}
	r := &types100.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{{Name: c.IfName, Mac: macFor(ip).String(), Sandbox: c.NetNS}},
		IPs: []*types100.IPConfig{{
			Interface: types100.Int(0),
			Address:   net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(p.subnet.Bits(), ip.BitLen())},
			Gateway:   gw.AsSlice(),
		}},
	}
	var out types.Result = r
	if v := configVersion(c); v != "" && v != r.CNIVersion {
		if conv, err := r.GetAsVersion(v); err == nil {
			out = conv
		}
	}
	return json.Marshal(out)
}

func configVersion(c Call) string {
	v, _ := c.Config["cniVersion"].(string)
	return v
}

type liveKey struct{ netns, ifname string }

// liveAddr is an interface that a successful ADD reported in a netns.
type liveAddr struct {
	containerID string
	mac         net.HardwareAddr
	addrs       []*net.IPNet
}

// observe updates the fake netns after a successful ADD or DEL answered
// with out; f.mu is held.
func (f *Exec) observe(c Call, out []byte) {
	switch c.Verb {
	case "DEL":
		for k, a := range f.live {
			if a.containerID == c.ContainerID && k.ifname == c.IfName {
				delete(f.live, k)
			}
		}
	case "ADD":
		if c.NetNS == "" {
			return
		}
		if a, ok := sandboxAddr(c, out); ok {
			f.live[liveKey{c.NetNS, c.IfName}] = a
		}
	}
}

// sandboxAddr reads the MAC and IPs of c's interface from an ADD answer.
func sandboxAddr(c Call, out []byte) (liveAddr, bool) {
	r, ok := currentResult(c, out)
	if !ok {
		return liveAddr{}, false
	}
	idx := -1
	for i, in := range r.Interfaces {
		if in != nil && in.Name == c.IfName && in.Sandbox != "" {
			idx = i
			break
		}
	}
	a := liveAddr{containerID: c.ContainerID}
	if idx >= 0 {
		a.mac, _ = net.ParseMAC(r.Interfaces[idx].Mac) // a bad MAC reads as none
	}
	for _, ipc := range r.IPs {
		if ipc == nil || (ipc.Interface != nil && *ipc.Interface != idx) {
			continue
		}
		if addr, ok := netip.AddrFromSlice(ipc.Address.IP); ok && addr.Unmap().IsGlobalUnicast() {
			ipn := ipc.Address
			a.addrs = append(a.addrs, &ipn)
		}
	}
	return a, idx >= 0 || len(a.addrs) > 0
}

// currentResult decodes an ADD answer at its own version (or the
// config's) and converts it to the current result type.
func currentResult(c Call, out []byte) (*types100.Result, bool) {
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	if json.Unmarshal(out, &head) != nil {
		return nil, false
	}
	v := head.CNIVersion
	if v == "" {
		v = configVersion(c)
	}
	res, err := create.Create(v, out)
	if err != nil {
		return nil, false
	}
	r, err := types100.NewResultFromResult(res)
	return r, err == nil
}
