package netns

import (
	"errors"
	"fmt"
	"net"
)

const loIfname = "lo"

// LoopbackUp sets lo up inside the netns at nsPath.
func LoopbackUp(nsPath string) error {
	return Do(nsPath, func() error { return SetUp(loIfname) })
}

// LoopbackCheck returns an error unless lo is up inside the netns at
// nsPath.
func LoopbackCheck(nsPath string) error {
	return Do(nsPath, func() error {
		lo, err := LinkByName(loIfname)
		if err != nil {
			return err
		}
		if lo.Flags&net.FlagUp == 0 {
			return errors.New("loopback interface is down")
		}
		return nil
	})
}

// GlobalAddrs returns the MAC and the global unicast addresses of ifname
// inside the netns at nsPath, and an error when it has none.
func GlobalAddrs(nsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	var mac net.HardwareAddr
	var out []*net.IPNet
	err := Do(nsPath, func() error {
		iface, addrs, err := Addrs(ifname)
		if err != nil {
			return err
		}
		mac = iface.HardwareAddr
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				out = append(out, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("no global IPv4 or IPv6 address on %q in %s", ifname, nsPath)
	}
	return mac, out, nil
}
