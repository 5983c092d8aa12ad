package cni

import (
	"sort"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Namespace holds what a pod operation passes to the plugins besides the
// sandbox: CNI_ARGS pairs and runtimeConfig capabilities.
type Namespace struct {
	id           string
	path         string
	args         map[string]string
	capabilities map[string]interface{}
}

// NamespaceOpts sets arguments or capabilities of a pod operation.
type NamespaceOpts func(s *Namespace) error

func newNamespace(id, path string, opts []NamespaceOpts) (*Namespace, error) {
	ns := &Namespace{id: id, path: path, args: map[string]string{}, capabilities: map[string]interface{}{}}
	for _, o := range opts {
		if err := o(ns); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// WithLabels adds every label as a CNI_ARGS pair. K8S_POD_NAME,
// K8S_POD_NAMESPACE and K8S_POD_UID also name the pod to the engine.
func WithLabels(labels map[string]string) NamespaceOpts {
	return func(s *Namespace) error {
		for k, v := range labels {
			s.args[k] = v
		}
		return nil
	}
}

// WithArgs adds one CNI_ARGS pair. Plugins receive the pairs given and no
// others; IP and MAC reach them too, as host-local's static address
// arguments.
func WithArgs(k, v string) NamespaceOpts {
	return func(s *Namespace) error {
		s.args[k] = v
		return nil
	}
}

// WithCapability passes a runtimeConfig capability under name (see the CNI
// conventions' well-known capabilities).
func WithCapability(name string, capability interface{}) NamespaceOpts {
	return func(s *Namespace) error {
		s.capabilities[name] = capability
		return nil
	}
}

// WithCapabilityPortMap passes the portMappings capability.
func WithCapabilityPortMap(portMapping []PortMapping) NamespaceOpts {
	return WithCapability(capPortMappings, portMapping)
}

// WithCapabilityIPRanges passes the ipRanges capability, as one range set
// (the conventions' list of range sets holds one).
func WithCapabilityIPRanges(ipRanges []IPRanges) NamespaceOpts {
	return WithCapability(capIPRanges, ipRanges)
}

// WithCapabilityBandWidth passes the bandwidth capability.
func WithCapabilityBandWidth(bandWidth BandWidth) NamespaceOpts {
	return WithCapability(capBandwidth, bandWidth)
}

// WithCapabilityDNS passes the dns capability.
func WithCapabilityDNS(dns DNS) NamespaceOpts {
	return WithCapability(capDNS, dns)
}

// WithCapabilityCgroupPath passes the cgroupPath capability.
func WithCapabilityCgroupPath(cgroupPath string) NamespaceOpts {
	return WithCapability(capCgroupPath, cgroupPath)
}

const (
	capPortMappings   = "portMappings"
	capIPRanges       = "ipRanges"
	capBandwidth      = "bandwidth"
	capDNS            = "dns"
	capCgroupPath     = "cgroupPath"
	capPodAnnotations = "io.kubernetes.cri.pod-annotations"

	argPodName      = "K8S_POD_NAME"
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodUID       = "K8S_POD_UID"
)

// podNetwork maps the operation to the engine's request: one attachment
// per non-loopback network, with its interface name, and the same
// runtime config for each.
func (ns *Namespace) podNetwork(nets []*Network) ocicni.PodNetwork {
	pod := ocicni.PodNetwork{
		ID: ns.id, NetNS: ns.path,
		Name: ns.args[argPodName], Namespace: ns.args[argPodNamespace], UID: ns.args[argPodUID],
		RuntimeConfig: map[string]ocicni.RuntimeConfig{},
	}
	rc := ns.runtimeConfig()
	for _, n := range nets {
		if n.loopback {
			continue
		}
		pod.Networks = append(pod.Networks, ocicni.NetAttachment{Name: n.config.Name, Ifname: n.ifName})
		pod.RuntimeConfig[n.config.Name] = rc
	}
	return pod
}

// runtimeConfig maps capabilities to the engine's fields, what has no
// field going to ExtraCapabilities, and passes every argument, sorted by
// key, as ExtraArgs: the engine runs [ocicni.WithArgsAsGiven], so CNI_ARGS
// holds the caller's pairs and nothing else, as go-cni's does (IP and MAC
// included, for host-local's static addresses).
func (ns *Namespace) runtimeConfig() ocicni.RuntimeConfig {
	var rc ocicni.RuntimeConfig
	keys := make([]string, 0, len(ns.args))
	for k := range ns.args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rc.ExtraArgs = append(rc.ExtraArgs, [2]string{k, ns.args[k]})
	}
	for k, v := range ns.capabilities {
		if !setTyped(&rc, k, v) {
			if rc.ExtraCapabilities == nil {
				rc.ExtraCapabilities = map[string]interface{}{}
			}
			rc.ExtraCapabilities[k] = v
		}
	}
	return rc
}

// setTyped fills the typed field for capability k when v has the type the
// face's options give it, and reports whether it did.
func setTyped(rc *ocicni.RuntimeConfig, k string, v interface{}) bool {
	if want, ok := typedCapability(v); !ok || want != k {
		return false
	}
	switch v := v.(type) {
	case []PortMapping:
		for _, p := range v {
			rc.PortMappings = append(rc.PortMappings, ocicni.PortMapping(p))
		}
	case []IPRanges:
		set := make([]ocicni.IpRange, 0, len(v))
		for _, r := range v {
			set = append(set, ocicni.IpRange(r))
		}
		rc.IpRanges = [][]ocicni.IpRange{set}
	case BandWidth:
		bw := ocicni.BandwidthConfig(v)
		rc.Bandwidth = &bw
	case DNS:
		if rc.ExtraCapabilities == nil {
			rc.ExtraCapabilities = map[string]interface{}{}
		}
		rc.ExtraCapabilities[k] = map[string][]string{"servers": v.Servers, "searches": v.Searches, "options": v.Options}
	case string:
		rc.CgroupPath = v
	case map[string]string:
		m := v
		rc.PodAnnotations = &m
	}
	return true
}

// typedCapability returns the capability whose typed field a value of v's
// type fills, as the face's options give them, and false for any other
// type.
func typedCapability(v interface{}) (string, bool) {
	switch v.(type) {
	case []PortMapping:
		return capPortMappings, true
	case []IPRanges:
		return capIPRanges, true
	case BandWidth:
		return capBandwidth, true
	case DNS:
		return capDNS, true
	case string:
		return capCgroupPath, true
	case map[string]string:
		return capPodAnnotations, true
	}
	return "", false
}
