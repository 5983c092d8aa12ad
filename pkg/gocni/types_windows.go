package cni

// The default directories, as go-cni sets them on Windows (containerd's
// install layout there).
const (
	// DefaultNetDir is the default conf dir.
	DefaultNetDir = "C:\\Program Files\\containerd\\cni\\conf"
	// DefaultCNIDir is the default plugin directory.
	DefaultCNIDir = "C:\\Program Files\\containerd\\cni\\bin"
)
