//go:build !linux

package ocicni

import "net"

// The manager builds everywhere, so that runtimes compile on their
// development machines, but pods can only be attached on Linux.

func bringUpLoopback(string) error { return ErrUnsupportedPlatform }

func checkLoopback(string) error { return ErrUnsupportedPlatform }

func interfaceAddrs(string, string) (net.HardwareAddr, []*net.IPNet, error) {
	return nil, nil, ErrUnsupportedPlatform
}
