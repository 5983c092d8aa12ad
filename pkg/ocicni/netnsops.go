package ocicni

import (
	"context"
	"net"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

// NetNSOps is what the manager does inside a pod's network namespace
// itself, without a plugin. These are the manager's only operations that
// enter a namespace, and so the only ones, besides the plugins, that need
// root. The default implementation does them in the kernel (Linux only);
// [WithNetNSOps] replaces it, as [WithExec] replaces the plugins, so that
// a runtime's unit tests run setup and status without root (package
// ocicnitest provides one).
//
// The netns path passed in has been validated: absolute, clean, not
// per-process (/proc/self/...), and not the host's network namespace. At
// setup it exists; at status it is the caller's, which may name a
// namespace that is gone.
type NetNSOps interface {
	// LoopbackUp sets lo up in the netns. Setup calls it before it
	// records the attachment order, and no plugin receives an ADD config
	// before it returned; an error fails the setup with nothing attached.
	LoopbackUp(ctx context.Context, netnsPath string) error
	// LoopbackCheck returns an error unless lo is up in the netns.
	// Status calls it before it reports any network.
	LoopbackCheck(ctx context.Context, netnsPath string) error
	// InterfaceAddrs returns the MAC and the global unicast addresses of
	// ifname in the netns, and an error when it has none. Status calls it
	// for an attachment that has no readable cached result.
	InterfaceAddrs(ctx context.Context, netnsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error)
}

// kernelNetNS is the default NetNSOps: it enters the namespace.
type kernelNetNS struct{}

var _ NetNSOps = kernelNetNS{}

func (kernelNetNS) LoopbackUp(_ context.Context, nsPath string) error {
	return netns.LoopbackUp(nsPath)
}

func (kernelNetNS) LoopbackCheck(_ context.Context, nsPath string) error {
	return netns.LoopbackCheck(nsPath)
}

func (kernelNetNS) InterfaceAddrs(_ context.Context, nsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	return netns.GlobalAddrs(nsPath, ifname)
}
