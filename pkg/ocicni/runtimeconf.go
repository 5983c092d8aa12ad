package ocicni

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
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

// checkName rejects values that would escape a cache file path: empty
// values, path separators, "..", and control characters.
func checkName(field, v string) error {
	if err := cache.ValidateName(field, v); err != nil {
		reason := err.Error()
		var ine *cache.InvalidNameError
		if errors.As(err, &ine) {
			reason = ine.Reason
		}
		return &InvalidArgumentError{Field: field, Value: v, Reason: reason, Err: err}
	}
	return nil
}

// checkContainerID validates a sandbox ID for any verb: it becomes part of
// cache file paths and of CNI_ARGS.
func checkContainerID(id string) error {
	if err := checkName("container ID", id); err != nil {
		return err
	}
	if cerr := utils.ValidateContainerID(id); cerr != nil {
		return &InvalidArgumentError{Field: "container ID", Value: id, Reason: cerr.Msg, Err: cerr}
	}
	return nil
}

// checkIfname validates an interface name as libcni does on ADD, plus the
// path checks.
func checkIfname(ifname string) error {
	if err := checkName("interface name", ifname); err != nil {
		return err
	}
	if cerr := utils.ValidateInterfaceName(ifname); cerr != nil {
		return &InvalidArgumentError{Field: "interface name", Value: ifname, Reason: cerr.Msg, Err: cerr}
	}
	return nil
}

// checkArgValue rejects CNI_ARGS values that could inject another key.
func checkArgValue(field, v string) error {
	if strings.ContainsAny(v, ";=") {
		return invalidArg(field, v, `contains ";" or "=", which would inject CNI_ARGS keys`)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return invalidArg(field, v, "contains a control character")
	}
	return nil
}

// checkPodArgs validates the pod fields that go into CNI_ARGS.
func checkPodArgs(pod *PodNetwork) error {
	if err := checkContainerID(pod.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"pod name", pod.Name}, {"pod namespace", pod.Namespace}, {"pod UID", pod.UID},
	} {
		if err := checkArgValue(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// checkNetNS validates the netns path given to SetUpPod.
func checkNetNS(path string) error {
	if path == "" || !filepath.IsAbs(path) {
		return invalidArg("netns path", path, "must be an absolute path")
	}
	if _, err := os.Stat(path); err != nil {
		return &InvalidArgumentError{Field: "netns path", Value: path, Reason: "does not exist", Err: err}
	}
	return nil
}

// assignIfnames returns the attachments to make: the requested ones, or
// the default network alone. Requested interface names are kept; the others
// get eth0, eth1, ... skipping names already taken. A duplicate requested
// name is an error.
func assignIfnames(requested []NetAttachment, defaultNet string) ([]NetAttachment, error) {
	atts := make([]NetAttachment, 0, max(len(requested), 1))
	if len(requested) == 0 {
		if defaultNet == "" {
			return nil, ErrNoDefaultNetwork
		}
		atts = append(atts, NetAttachment{Name: defaultNet})
	} else {
		atts = append(atts, requested...)
	}
	taken := make(map[string]bool, len(atts))
	for _, a := range atts {
		if err := checkName("network name", a.Name); err != nil {
			return nil, err
		}
		if a.Ifname == "" {
			continue
		}
		if err := checkIfname(a.Ifname); err != nil {
			return nil, err
		}
		if taken[a.Ifname] {
			return nil, &InvalidArgumentError{
				Field: "interface name", Value: a.Ifname,
				Reason: fmt.Sprintf("requested twice (network %q)", a.Name),
			}
		}
		taken[a.Ifname] = true
	}
	next := 0
	for i := range atts {
		if atts[i].Ifname != "" {
			continue
		}
		for taken[fmt.Sprintf("eth%d", next)] {
			next++
		}
		atts[i].Ifname = fmt.Sprintf("eth%d", next)
		taken[atts[i].Ifname] = true
	}
	return atts, nil
}

// buildRuntimeConf builds libcni's runtime configuration for one attachment:
// CNI_ARGS as ocicni sets them, and every runtime-config capability.
func buildRuntimeConf(pod *PodNetwork, att NetAttachment) (*libcni.RuntimeConf, error) {
	rc := pod.RuntimeConfig[att.Name]
	rt := &libcni.RuntimeConf{
		ContainerID: pod.ID,
		NetNS:       pod.NetNS,
		IfName:      att.Ifname,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", pod.ID},
			{"K8S_POD_UID", pod.UID},
		},
		CapabilityArgs: map[string]interface{}{},
	}
	set := map[string]bool{"IgnoreUnknown": true, "K8S_POD_NAMESPACE": true, "K8S_POD_NAME": true,
		"K8S_POD_INFRA_CONTAINER_ID": true, "K8S_POD_UID": true, "IP": true, "MAC": true}

	// Propagate the runtime's own CNI_ARGS to non-Kubernetes plugins, as
	// ocicni does, without letting them override the keys set here.
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && !set[k] {
			rt.Args = append(rt.Args, [2]string{k, v})
		}
	}

	if rc.IP != "" {
		if net.ParseIP(rc.IP) == nil {
			return nil, invalidArg(fmt.Sprintf("static IP for network %q", att.Name), rc.IP, "not an IP address")
		}
		rt.Args = append(rt.Args, [2]string{"IP", rc.IP})
	}
	if rc.MAC != "" {
		if _, err := net.ParseMAC(rc.MAC); err != nil {
			return nil, &InvalidArgumentError{Field: fmt.Sprintf("static MAC for network %q", att.Name),
				Value: rc.MAC, Reason: "not a MAC address", Err: err}
		}
		rt.Args = append(rt.Args, [2]string{"MAC", rc.MAC})
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
	return rt, nil
}
