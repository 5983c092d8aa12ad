package cni

import (
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// Defaults, as go-cni names them.
const (
	// CNIPluginName is the name of this CNI implementation.
	CNIPluginName = "cni"
	// DefaultMaxConfNum is how many files of the conf dir
	// [WithDefaultConf] loads unless [WithPluginMaxConfNum] says otherwise.
	DefaultMaxConfNum = 1
	// DefaultPrefix is the interface name prefix: networks get eth0,
	// eth1, ...
	DefaultPrefix = "eth"
	// VendorCNIDirTemplate formats a vendor's plugin directory from a
	// root and a vendor name.
	VendorCNIDirTemplate = "%s/opt/%s/bin"
)

// Deprecated aliases kept for source compatibility.
type (
	// CNIOpt is [Opt].
	//
	// Deprecated: use Opt.
	CNIOpt = Opt //nolint:revive // name fixed by the compatible API
	// CNIResult is [Result].
	//
	// Deprecated: use Result.
	CNIResult = Result //nolint:revive // name fixed by the compatible API
)

// RWMutex is sync.RWMutex, exported by go-cni; kept for source
// compatibility.
type RWMutex = sync.RWMutex

// ConfigResult is a copy of the loaded configuration, for display (such as
// `crictl info`).
type ConfigResult struct {
	PluginDirs       []string
	PluginConfDir    string
	PluginMaxConfNum int
	Prefix           string
	Networks         []*ConfNetwork
}

// ConfNetwork is one loaded network and the interface name it gets.
type ConfNetwork struct {
	Config *NetworkConfList
	IFName string
}

// NetworkConfList is a network's config list with its source as a string.
type NetworkConfList struct {
	Name       string
	CNIVersion string
	Plugins    []*NetworkConf
	Source     string
}

// NetworkConf is one plugin's config with its source as a string.
type NetworkConf struct {
	Network *types.NetConf
	Source  string
}

// Network is one loaded network: a config list and the interface name it
// gets in every sandbox. Unlike go-cni's, it has no methods of its own:
// every plugin run goes through the engine (see the package doc).
type Network struct {
	config   *libcni.NetworkConfigList
	ifName   string
	loopback bool // brought up in-process by the engine; no plugin runs
}

// PortMapping is one entry of the portMappings capability.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	Protocol      string
	HostIP        string
}

// IPRanges is one range of the ipRanges capability.
type IPRanges struct {
	Subnet     string
	RangeStart string
	RangeEnd   string
	Gateway    string
}

// BandWidth holds the ingress and egress limits of the bandwidth
// capability, in bits per second (rates) and bits (bursts).
type BandWidth struct {
	IngressRate  uint64
	IngressBurst uint64
	EgressRate   uint64
	EgressBurst  uint64
}

// DNS holds the dns capability.
type DNS struct {
	// Servers are the cluster's name servers.
	Servers []string
	// Searches are the cluster's search domains.
	Searches []string
	// Options are resolver options.
	Options []string
}
