package ocicni

import (
	"fmt"
	"net"
	"os"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/libcni"
)

// Capability keys passed in runtimeConfig, as defined by CNI's CONVENTIONS.
const (
	capPortMappings   = "portMappings"
	capBandwidth      = "bandwidth"
	capIPRanges       = "ipRanges"
	capAliases        = "aliases"
	capCgroupPath     = "cgroupPath"
	capPodAnnotations = "io.kubernetes.cri.pod-annotations"
)

// buildRuntimeConf builds libcni's runtime configuration for one attachment:
// CNI_ARGS as ocicni sets them (only the pod's own pairs when asGiven; see
// [WithArgsAsGiven]), and every runtime-config capability.
func buildRuntimeConf(pod *PodNetwork, att NetAttachment, asGiven bool) (*libcni.RuntimeConf, error) {
	rc := pod.RuntimeConfig[att.Name]
	rt := &libcni.RuntimeConf{
		ContainerID:    pod.ID,
		NetNS:          pod.NetNS,
		IfName:         att.Ifname,
		CapabilityArgs: map[string]interface{}{},
	}
	set := map[string]bool{}
	if !asGiven {
		rt.Args = ocicniArgs(pod)
		for _, kv := range rt.Args {
			set[kv[0]] = true
		}
		// IP and MAC come from the typed fields only, as in ocicni.
		set["IP"], set["MAC"] = true, true
		rt.Args = append(rt.Args, processArgs(set)...)
	}

	if rc.IP != "" {
		if net.ParseIP(rc.IP) == nil {
			return nil, invalidArg(fmt.Sprintf("static IP for network %q", att.Name), rc.IP, "not an IP address")
		}
		rt.Args = append(rt.Args, [2]string{"IP", rc.IP})
		set["IP"] = true
	}
	if rc.MAC != "" {
		if _, err := net.ParseMAC(rc.MAC); err != nil {
			return nil, &InvalidArgumentError{
				Field: fmt.Sprintf("static MAC for network %q", att.Name),
				Value: rc.MAC, Reason: "not a MAC address", Err: err,
			}
		}
		rt.Args = append(rt.Args, [2]string{"MAC", rc.MAC})
		set["MAC"] = true
	}

	if len(rc.PortMappings) != 0 {
		rt.CapabilityArgs[capPortMappings] = rc.PortMappings
	}
	if rc.Bandwidth != nil {
		rt.CapabilityArgs[capBandwidth] = map[string]uint64{
			"ingressRate":  rc.Bandwidth.IngressRate,
			"ingressBurst": rc.Bandwidth.IngressBurst,
			"egressRate":   rc.Bandwidth.EgressRate,
			"egressBurst":  rc.Bandwidth.EgressBurst,
		}
	}
	if len(rc.IpRanges) > 0 {
		rt.CapabilityArgs[capIPRanges] = rc.IpRanges
	}
	if len(pod.Aliases) > 0 {
		rt.CapabilityArgs[capAliases] = pod.Aliases
	}
	if rc.CgroupPath != "" {
		rt.CapabilityArgs[capCgroupPath] = rc.CgroupPath
	}
	if rc.PodAnnotations != nil {
		rt.CapabilityArgs[capPodAnnotations] = rc.PodAnnotations
	}
	return addExtras(rt, set, rc, att.Name)
}

// addExtras appends rc's ExtraArgs whose keys the manager has not set
// already, and its ExtraCapabilities whose keys the typed fields did not
// fill.
func addExtras(rt *libcni.RuntimeConf, set map[string]bool, rc RuntimeConfig, network string) (*libcni.RuntimeConf, error) {
	for _, kv := range rc.ExtraArgs {
		k, v := kv[0], kv[1]
		if k == "" || strings.ContainsAny(k, "=;") || strings.Contains(v, ";") ||
			strings.IndexFunc(k+v, unicode.IsControl) >= 0 {
			return nil, invalidArg(fmt.Sprintf("CNI_ARGS pair for network %q", network), k+"="+v,
				`a key must be non-empty without "=" or ";", a value without ";", and neither may hold a control character`)
		}
		if set[k] {
			continue
		}
		set[k] = true
		rt.Args = append(rt.Args, [2]string{k, v})
	}
	for k, v := range rc.ExtraCapabilities {
		if _, ok := rt.CapabilityArgs[k]; !ok && k != "" {
			rt.CapabilityArgs[k] = v
		}
	}
	return rt, nil
}

// ocicniArgs are the CNI_ARGS pairs ocicni sets for every pod.
func ocicniArgs(pod *PodNetwork) [][2]string {
	return [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", pod.Namespace},
		{"K8S_POD_NAME", pod.Name},
		{"K8S_POD_INFRA_CONTAINER_ID", pod.ID},
		{"K8S_POD_UID", pod.UID},
	}
}

// processArgs are the pairs of the runtime's own CNI_ARGS environment
// variable whose keys are not in set, which ocicni propagates to
// non-Kubernetes plugins.
func processArgs(set map[string]bool) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && !set[k] {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
