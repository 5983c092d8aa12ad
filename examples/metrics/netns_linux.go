package main

// The few network-namespace and link helpers the metrics example needs,
// copied from examples/quickstart (so that this module stands alone). They
// talk to the kernel through golang.org/x/sys/unix, so neither the ip nor
// the nsenter binary is needed.
//
// A network namespace belongs to an OS thread, not to a goroutine, and the
// Go scheduler moves goroutines between threads. So every helper that
// switches namespace does so on a fresh goroutine locked to its thread
// with runtime.LockOSThread, and puts the thread back into its original
// namespace before unlocking it. A thread that cannot be put back is never
// unlocked: when a goroutine exits still locked, the runtime terminates
// its thread instead of reusing it (or parks it for good, if it is the
// main thread), so the wrong namespace cannot leak into unrelated
// goroutines.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// netnsDir is where named namespaces are pinned, as "ip netns add" does.
const netnsDir = "/run/netns"

// errLinkNotFound is returned when a named interface does not exist.
var errLinkNotFound = errors.New("link not found")

// threadNetNS is the namespace file of the calling OS thread.
func threadNetNS() string {
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
}

// newNetNS creates a network namespace, pins it at /run/netns/name with a
// bind mount so that it outlives every process in it, and returns that
// path. removeNetNS undoes it.
func newNetNS(name string) (string, error) {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return "", err
	}
	// The bind mount needs an existing file to mount onto. O_EXCL: never
	// take over a namespace someone else pinned under the same name.
	path := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("create netns: %w", err)
	}
	f.Close()

	errc := make(chan error, 1)
	go func() { errc <- pinNewNetNS(path) }()
	if err := <-errc; err != nil {
		os.Remove(path) // best effort: the error that matters is err
		return "", fmt.Errorf("create netns: %w", err)
	}
	return path, nil
}

// pinNewNetNS makes a network namespace, bind-mounts it at path, and puts
// the calling thread back into the namespace it came from. It must run on
// a goroutine of its own. A thread left in the new namespace would not
// do: the runtime ends the thread of a goroutine that exits locked to it,
// except the process's main thread, which it parks for good instead, and
// a parked main thread would keep the namespace, and every interface in
// it, alive after removeNetNS. Only a thread that cannot be put back
// stays locked, so that the runtime discards it.
func pinNewNetNS(path string) error {
	runtime.LockOSThread()
	orig, err := os.Open(threadNetNS())
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open current netns: %w", err)
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("unshare: %w", err)
	}
	merr := unix.Mount(threadNetNS(), path, "none", unix.MS_BIND, "")
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(merr, fmt.Errorf("restore netns: %w", err))
	}
	runtime.UnlockOSThread()
	if merr != nil {
		_ = unix.Unmount(path, unix.MNT_DETACH)
		return fmt.Errorf("bind mount %s: %w", path, merr)
	}
	return nil
}

// removeNetNS unmounts and deletes a namespace made by newNetNS. The
// kernel frees the namespace once nothing else holds it. A path that is
// already gone is not an error.
func removeNetNS(path string) error {
	// EINVAL: not a mount point (any more); ENOENT: no such file.
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// linkByName returns the interface called name in the current namespace,
// or an error matching errLinkNotFound.
func linkByName(name string) (*net.Interface, error) {
	// net.InterfaceByName's "not found" error cannot be told apart from
	// others without matching its text, so look through the list instead.
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for i := range ifaces {
		if ifaces[i].Name == name {
			return &ifaces[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %q", errLinkNotFound, name)
}

// linkExists reports whether an interface called name exists in the
// current namespace.
func linkExists(name string) (bool, error) {
	_, err := linkByName(name)
	if errors.Is(err, errLinkNotFound) {
		return false, nil
	}
	return err == nil, err
}

// deleteLink deletes the interface called name in the current namespace,
// as "ip link delete name" does, with one RTM_DELLINK netlink request. A
// missing interface is not an error.
func deleteLink(name string) error {
	iface, err := linkByName(name)
	if errors.Is(err, errLinkNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	kernel := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	if err := unix.Bind(fd, kernel); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}

	// The request: a netlink header, then an ifinfomsg that names the
	// link by index. All fields are in host byte order.
	//   nlmsghdr:  len(4) type(2) flags(2) seq(4) pid(4)
	//   ifinfomsg: family(1) pad(1) type(2) index(4) flags(4) change(4)
	ne := binary.NativeEndian
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofIfInfomsg)
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_DELLINK)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(req[8:], 1)
	ne.PutUint32(req[unix.SizeofNlMsghdr+4:], uint32(iface.Index))
	if err := unix.Sendto(fd, req, 0, kernel); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}

	// NLM_F_ACK asks for one NLMSG_ERROR reply: a netlink header, then an
	// int32 that is 0 on success or a negated errno.
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("netlink receive: %w", err)
	}
	if n < unix.SizeofNlMsghdr+4 || ne.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("delete link %q: unexpected netlink reply", name)
	}
	switch code := int32(ne.Uint32(buf[unix.SizeofNlMsghdr:])); {
	case code == 0:
		return nil
	case unix.Errno(-code) == unix.ENODEV:
		return nil // deleted by someone else since linkByName
	default:
		return fmt.Errorf("delete link %q: %w", name, unix.Errno(-code))
	}
}
