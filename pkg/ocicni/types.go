package ocicni

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/seed-671fdd43/ocicni/internal/guard"
)

// This file holds the surface that is source-compatible with
// github.com/cri-o/ocicni/pkg/ocicni. Do not change these declarations;
// new capability comes through options and new types.

const (
	// DefaultInterfaceName is the string to be used for the interface name inside the net namespace.
	DefaultInterfaceName = "eth0"
	// CNIPluginName is the default name of the plugin.
	CNIPluginName = "cni"
)

// PortMapping maps to the standard CNI portmapping Capability.
// See: https://github.com/containernetworking/cni/blob/main/CONVENTIONS.md
type PortMapping struct {
	// HostPort is the port number on the host.
	HostPort int32 `json:"hostPort"`
	// ContainerPort is the port number inside the sandbox.
	ContainerPort int32 `json:"containerPort"`
	// Protocol is the protocol of the port mapping.
	Protocol string `json:"protocol"`
	// HostIP is the host ip to use.
	HostIP string `json:"hostIP"`
}

// IpRange maps to the standard CNI ipRanges Capability.
// See: https://github.com/containernetworking/cni/blob/main/CONVENTIONS.md
//
//nolint:revive,stylecheck // name fixed by the compatible API
type IpRange struct {
	// Subnet is the whole CIDR
	Subnet string `json:"subnet"`
	// RangeStart is the first available IP in subnet
	RangeStart string `json:"rangeStart,omitempty"`
	// RangeEnd is the last available IP in subnet
	RangeEnd string `json:"rangeEnd,omitempty"`
	// Gateway is the gateway of subnet
	Gateway string `json:"gateway,omitempty"`
}

// RuntimeConfig is additional configuration for a single CNI network that
// is pod-specific rather than general to the network.
type RuntimeConfig struct {
	// IP is a static IP to be specified in the network. Can only be used
	// with the hostlocal IP allocator. If left unset, an IP will be
	// dynamically allocated.
	IP string
	// MAC is a static MAC address to be assigned to the network interface.
	// If left unset, a MAC will be dynamically allocated.
	MAC string
	// PortMappings is the port mapping of the sandbox.
	PortMappings []PortMapping
	// Bandwidth is the bandwidth limiting of the pod
	Bandwidth *BandwidthConfig
	// IpRanges is the ip range gather which is used for address allocation
	//nolint:revive,stylecheck // name fixed by the compatible API
	IpRanges [][]IpRange
	// CgroupPath is the path to the pod's cgroup
	CgroupPath string
	// PodAnnotations are the annotations of the pod.
	PodAnnotations *map[string]string `json:"io.kubernetes.cri.pod-annotations,omitempty"`

	// The fields below are additions to cri-o/ocicni's RuntimeConfig, for
	// runtimes that pass arguments and capabilities ocicni has no field
	// for (the go-cni face, package gocni, maps its Namespace options
	// here).

	// ExtraArgs are CNI_ARGS pairs appended after the ones the manager
	// sets (IgnoreUnknown, K8S_POD_*, IP, MAC), which they cannot
	// override. A key must be non-empty and hold no "=" or ";", a value
	// no ";"; neither may hold a control character (NUL, newline, ...).
	ExtraArgs [][2]string `json:"-"`
	// ExtraCapabilities are runtimeConfig capabilities (such as "dns")
	// passed to plugins that declare them. The fields above win over a
	// key of the same name.
	ExtraCapabilities map[string]interface{} `json:"-"`
}

// BandwidthConfig maps to the standard CNI bandwidth Capability.
// See: https://github.com/containernetworking/cni/blob/main/CONVENTIONS.md
type BandwidthConfig struct {
	// IngressRate is a limit for incoming traffic in bps
	IngressRate  uint64
	IngressBurst uint64

	// EgressRate is a limit for outgoing traffic in bps
	EgressRate  uint64
	EgressBurst uint64
}

// PodNetwork configures the network of a pod sandbox.
type PodNetwork struct {
	// Name is the name of the pod.
	Name string
	// Namespace is the namespace of the pod.
	Namespace string
	// ID is the id of the sandbox container.
	ID string
	// UID is the UID of the pod that owns the sandbox.
	UID string
	// NetNS is the network namespace path of the sandbox.
	NetNS string

	// Networks is a list of CNI network names (and optional interface
	// names) to attach to the sandbox. Leave this list empty to attach the
	// default network to the sandbox
	Networks []NetAttachment

	// RuntimeConfig is configuration specific to a single CNI network.
	// It is optional, and can be omitted for some or all specified networks
	// without issue.
	RuntimeConfig map[string]RuntimeConfig

	// Aliases are network-scoped names for resolving a container
	// by name. The key value is the network name and the value is
	// a string slice of aliases
	Aliases map[string][]string
}

// NetAttachment describes a container network attachment.
//
// One attachment is seen through these types:
//   - [NetAttachment]: a network and an interface name, as a request
//     names them and as every other type names the attachment.
//   - [cache.Entry] and [cache.EntryError]: libcni's cache file of an
//     attachment, readable or corrupt; [cache.Attachment]: its line in
//     the order record, with its saved config and retry state.
//   - Internally, the inventory merges these into one view per
//     attachment, and a verb turns that view into a plan: the config list
//     and runtime config a plugin runs with, and whether libcni may read
//     the cache entry.
//   - [Outcome]: what one DEL did; [PendingTeardown]: a failed DEL that is
//     retried; [NetResult]: what ADD or status returns.
type NetAttachment struct {
	// Name contains the name of the CNI network to which the container
	// should be or is attached
	Name string
	// Ifname contains the optional interface name of the attachment
	Ifname string
}

// NetResult contains the result the network attachment operation.
//
// Results of every spec version, 0.1.0 to 1.1.0, are accepted and returned
// as the plugins produced them: empty results of configuration-only
// plugins, 0.2.0 results without interfaces, IPs without an interface
// index. Nothing dereferences an absent interface or IP. [SandboxIPs] picks
// a network's sandbox interface and its IPs from any of them. A cached
// result that cannot be converted to the config's version is returned as
// stored, and the conversion error is logged.
type NetResult struct {
	// Result is the CNI Result
	Result types.Result
	// NetAttachment contains the network and interface names of this
	// network attachment
	NetAttachment
}

// CNIPlugin is the interface that needs to be implemented by a plugin.
//
//nolint:interfacebloat // compatible API
type CNIPlugin interface {
	// Name returns the plugin's name. This will be used when searching
	// for a plugin by name, e.g.
	Name() string

	// GetDefaultNetworkName returns the name of the plugin's default
	// network.
	GetDefaultNetworkName() string

	// SetUpPod is the method called after the sandbox container of
	// the pod has been created but before the other containers of the
	// pod are launched.
	SetUpPod(network PodNetwork) ([]NetResult, error)

	// SetUpPodWithContext is the same as SetUpPod but takes a context
	SetUpPodWithContext(ctx context.Context, network PodNetwork) ([]NetResult, error)

	// TearDownPod is the method called before a pod's sandbox container will be deleted
	TearDownPod(network PodNetwork) error

	// TearDownPodWithContext is the same as TearDownPod but takes a context
	TearDownPodWithContext(ctx context.Context, network PodNetwork) error

	// GetPodNetworkStatus is the method called to obtain the ipv4 or ipv6 addresses of the pod sandbox
	GetPodNetworkStatus(network PodNetwork) ([]NetResult, error)

	// GetPodNetworkStatusWithContext is the same as GetPodNetworkStatus but takes a context
	GetPodNetworkStatusWithContext(ctx context.Context, network PodNetwork) ([]NetResult, error)

	// GC cleans up any resources concerned with stale pods (pod other than the ones provided by validPods).
	// The call to cniNetworkPlugin.GC() is idempotent and can be called multiple times.
	GC(ctx context.Context, validPods []*PodNetwork) error

	// Status returns error if the network plugin is in error state
	Status() error

	// StatusWithContext is the same as Status but takes a context
	StatusWithContext(ctx context.Context) error

	// Shutdown terminates all driver operations
	Shutdown() error
}

// STATUS error codes from the CNI 1.1 spec, as libcni's types package
// defines them.
const (
	// ErrCodePluginNotAvailable means the plugin cannot serve ADD
	// requests.
	ErrCodePluginNotAvailable = types.ErrPluginNotAvailable
	// ErrCodeLimitedConnectivity means the plugin cannot serve ADD
	// requests, and existing pods may have limited connectivity.
	ErrCodeLimitedConnectivity = types.ErrLimitedConnectivity
)

// ErrNoSandboxInterface means a result names no interface inside the
// sandbox and carries no IP that could belong to one.
var ErrNoSandboxInterface = errors.New("ocicni: result has no sandbox interface or IP")

// SandboxIPs picks, from a network's result, the interface inside the
// sandbox and the IPs assigned to it. It accepts results of every version,
// results that also list host-side interfaces, IPs without an interface
// index (delegated IPAM) and results with no interfaces at all (CNI 0.2.0).
// iface is nil when the result lists no sandbox interface. An empty result
// yields ErrNoSandboxInterface.
func SandboxIPs(r NetResult) (iface *types100.Interface, ips []*types100.IPConfig, err error) {
	if r.Result == nil {
		return nil, nil, ErrNoSandboxInterface
	}
	cur, err := guard.Value("libcni result conversion", "", func() (*types100.Result, error) {
		return types100.NewResultFromResult(r.Result)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ocicni: converting %s result of network %q: %w", r.Result.Version(), r.Name, err)
	}
	idx := sandboxIndex(cur.Interfaces, r.Ifname)
	if idx >= 0 {
		iface = cur.Interfaces[idx]
	}
	ips = ipsOf(cur, idx)
	if iface == nil && len(ips) == 0 {
		return nil, nil, fmt.Errorf("%w: network %q", ErrNoSandboxInterface, r.Name)
	}
	return iface, ips, nil
}

// sandboxIndex returns the index of the sandbox interface: the one named
// ifname, else the first with a sandbox, else -1.
func sandboxIndex(ifaces []*types100.Interface, ifname string) int {
	idx := -1
	for i, in := range ifaces {
		if in == nil || in.Sandbox == "" {
			continue
		}
		if idx < 0 || (in.Name == ifname && ifaces[idx].Name != ifname) {
			idx = i
		}
	}
	return idx
}

// ipsOf returns the IPs of the interface at idx, and those without a
// usable interface index, which are taken to be the sandbox's.
func ipsOf(cur *types100.Result, idx int) []*types100.IPConfig {
	var ips []*types100.IPConfig
	for _, ip := range cur.IPs {
		switch {
		case ip == nil:
		case ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(cur.Interfaces):
			ips = append(ips, ip) // no (usable) index: assume the sandbox
		case *ip.Interface == idx:
			ips = append(ips, ip)
		}
	}
	return ips
}
