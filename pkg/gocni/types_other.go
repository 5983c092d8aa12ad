//go:build !windows

package cni

// The default directories, as go-cni sets them outside Windows.
const (
	// DefaultNetDir is the default conf dir.
	DefaultNetDir = "/etc/cni/net.d"
	// DefaultCNIDir is the default plugin directory.
	DefaultCNIDir = "/opt/cni/bin"
)
