package netns

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
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

// ThreadNS returns an open handle of the calling thread's network
// namespace when it is not the process's, and nil when it is: for a
// caller that runs on a thread locked in another namespace, such as a
// runtime in RootlessKit's detached namespace. The process's namespace is
// the one its main thread had when this package was initialized: the main
// thread may run a goroutine locked elsewhere later. The caller closes the
// handle.
func ThreadNS() (*os.File, error) {
	if processNS.err != nil {
		return nil, processNS.err
	}
	f, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var thread unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &thread); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: %w", err)
	}
	if thread.Dev == processNS.st.Dev && thread.Ino == processNS.st.Ino {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// processNS identifies the process's network namespace; see ThreadNS.
var processNS = readProcessNS()

// nsID is a namespace's identity (its file's device and inode), or why it
// could not be read.
type nsID struct {
	st  unix.Stat_t
	err error
}

func readProcessNS() nsID {
	var id nsID
	if err := unix.Stat("/proc/thread-self/ns/net", &id.st); err != nil {
		id.err = fmt.Errorf("netns: the process's network namespace: %w", err)
	}
	return id
}
