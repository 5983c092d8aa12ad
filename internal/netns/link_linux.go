//go:build linux

package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrLinkNotFound is returned when a named interface does not exist.
var ErrLinkNotFound = errors.New("netns: link not found")

// LinkByName returns the interface called name in the current namespace,
// or an error wrapping [ErrLinkNotFound].
func LinkByName(name string) (*net.Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("netns: list interfaces: %w", err)
	}
	for i := range ifaces {
		if ifaces[i].Name == name {
			return &ifaces[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrLinkNotFound, name)
}

// LinkExists reports whether an interface called name exists in the
// current namespace.
func LinkExists(name string) (bool, error) {
	_, err := LinkByName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Addrs returns the interface called name and its addresses, in the
// current namespace.
func Addrs(name string) (*net.Interface, []*net.IPNet, error) {
	iface, err := LinkByName(name)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil, nil, fmt.Errorf("netns: addresses of %q: %w", name, err)
	}
	out := make([]*net.IPNet, 0, len(addrs))
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out = append(out, ipn)
		}
	}
	return iface, out, nil
}

// SetUp sets the IFF_UP flag of the interface called name in the current
// namespace.
func SetUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("%w: %q", ErrLinkNotFound, name)
		}
		return fmt.Errorf("netns: get flags of %q: %w", name, err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns: set %q up: %w", name, err)
	}
	return nil
}

// DeleteLink deletes the interface called name in the current namespace.
// A missing interface is not an error.
func DeleteLink(name string) error {
	iface, err := LinkByName(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netns: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netns: netlink bind: %w", err)
	}

	msg := make([]byte, unix.SizeofNlMsghdr+unix.SizeofIfInfomsg)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.RTM_DELLINK)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:], 1)
	// ifinfomsg: family(1) pad(1) type(2) index(4) flags(4) change(4)
	ne.PutUint32(msg[unix.SizeofNlMsghdr+4:], uint32(iface.Index))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netns: netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("netns: netlink receive: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("netns: netlink parse: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(ne.Uint32(m.Data[:4])); code != 0 {
				errno := unix.Errno(-code)
				if errno == unix.ENODEV {
					return nil
				}
				return fmt.Errorf("netns: delete link %q: %w", name, errno)
			}
		}
	}
	return nil
}
