//go:build !linux

package netns

import (
	"net"
	"os"
)

// Off Linux the package builds, so that the library compiles on
// development machines, but no namespace can be entered.

// LoopbackUp returns [ErrUnsupported].
func LoopbackUp(string) error { return ErrUnsupported }

// LoopbackCheck returns [ErrUnsupported].
func LoopbackCheck(string) error { return ErrUnsupported }

// GlobalAddrs returns [ErrUnsupported].
func GlobalAddrs(string, string) (net.HardwareAddr, []*net.IPNet, error) {
	return nil, nil, ErrUnsupported
}

// ThreadNS returns nil: outside Linux there are no network namespaces.
func ThreadNS() (*os.File, error) { return nil, nil }
