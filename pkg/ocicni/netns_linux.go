package ocicni

import (
	"errors"
	"fmt"
	"net"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

const loIfname = "lo"

// bringUpLoopback sets lo up inside the netns. It needs no plugin.
func bringUpLoopback(nsPath string) error {
	return netns.Do(nsPath, func() error { return netns.SetUp(loIfname) })
}

// checkLoopback reports an error unless lo is up inside the netns.
func checkLoopback(nsPath string) error {
	return netns.Do(nsPath, func() error {
		lo, err := netns.LinkByName(loIfname)
		if err != nil {
			return err
		}
		if lo.Flags&net.FlagUp == 0 {
			return errors.New("loopback interface is down")
		}
		return nil
	})
}

// interfaceAddrs reads the MAC and global addresses of ifname inside the
// netns, for networks whose result is not cached.
func interfaceAddrs(nsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	var mac net.HardwareAddr
	var out []*net.IPNet
	err := netns.Do(nsPath, func() error {
		iface, addrs, err := netns.Addrs(ifname)
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
