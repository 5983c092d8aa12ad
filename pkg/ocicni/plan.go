package ocicni

import (
	"fmt"
	"net"
	"os"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// plan is one attachment to act on: the network list and the runtime
// configuration to run it with.
type plan struct {
	NetAttachment
	id     string                    // container ID
	list   *libcni.NetworkConfigList // nil: neither loaded nor cached
	rt     *libcni.RuntimeConf
	policy TeardownPolicy // the network's own; "": the manager's default
	// timeouts bound its verbs' plugin runs: the network's own, over the
	// manager's default (see [Timeouts]).
	timeouts Timeouts
	// file is the cache file the inventory planned from: the accepted
	// entry or the corrupt file; "" when only the record or the request
	// names the attachment.
	file string
	// cacheEntry is file when the inventory accepted it as the
	// attachment's cache entry and libcni can decode its result: libcni
	// then reads it as prevResult and removes it once DEL succeeded.
	// Without it (""), libcni runs pointed at an empty cache dir, on
	// every path, and the engine removes the attachment's file once DEL
	// succeeded (a corrupt entry's DEL would drop the file before running
	// any plugin, or panic).
	cacheEntry string
	// onDisk is set when a cache entry or the order record names the
	// attachment, so it may exist: having no config to DEL it with is
	// then a failure ([Orphaned]), not a warning.
	onDisk bool
	// corrupt is why its cache entry is corrupt, if it is; an Orphaned
	// outcome says so.
	corrupt error
}

// planFor builds the DEL or CHECK plan of one attachment of container
// pod.ID, as the inventory knows it (s). Its config is, in this order:
// the config cached at ADD, when the cache entry holds a usable one; the
// config saved with the order record (see [cache.Cache.SaveConfig]); the
// loaded config. netns is the caller's netns path, which wins over the
// ones stored in the cache entry and the record; stored paths are used
// only if they pass [usableStoredNetNS]. It never modifies pod.
func (e *engine) planFor(pod *PodNetwork, netns string, s *knownAttachment, set *networkSet, log *logrus.Entry) (*plan, error) {
	p := &plan{NetAttachment: s.NetAttachment, id: pod.ID, onDisk: s.entry != nil || s.corrupt != nil || s.rec != nil}
	if s.corrupt != nil {
		p.corrupt = s.corrupt
	}
	plog := func() *logrus.Entry { // built only to warn
		return log.WithFields(logrus.Fields{"network": s.Name, "ifname": s.Ifname})
	}
	if netns == "" {
		netns = e.storedNetNS(s, plog)
	}
	var over netconf.Overrides
	if e := s.entry; e != nil {
		list, o, err := set.Stored(e.Config, s.Name, e.Path)
		if err == nil {
			p.list, over = list, o
			p.rt = &libcni.RuntimeConf{
				ContainerID:    pod.ID,
				NetNS:          netns,
				IfName:         s.Ifname,
				Args:           e.CNIArgs,
				CapabilityArgs: e.CapabilityArgs,
			}
		} else {
			plog().WithField("file", e.Path).WithError(err).
				Warn("Cached config unusable; falling back to the saved or loaded config")
		}
	}
	if p.list == nil {
		list, o := e.savedList(pod.ID, s, set, plog)
		if list == nil {
			n := set.Network(s.Name)
			if n == nil {
				return p, nil
			}
			list, o = n.List, n.Overrides
		}
		q := *pod
		q.NetNS = netns
		rt, err := buildRuntimeConf(&q, s.NetAttachment, e.opts.argsAsGiven)
		if err != nil {
			return nil, err
		}
		p.list, p.rt, over = list, rt, o
	}
	e.applyOverrides(p, over)
	s.applyCacheRule(p, plog)
	return p, nil
}

// loadedPlan builds the ADD plan of attachment att of pod on the loaded
// network n.
func (e *engine) loadedPlan(pod *PodNetwork, att NetAttachment, n *network) (*plan, error) {
	rt, err := buildRuntimeConf(pod, att, e.opts.argsAsGiven)
	if err != nil {
		return nil, err
	}
	p := &plan{NetAttachment: att, id: pod.ID, list: n.List, rt: rt}
	e.applyOverrides(p, n.Overrides)
	return p, nil
}

// applyOverrides sets what the network's config overrides of the
// manager's options in p: its teardown policy (the default applies when
// the outcome is settled) and its timeouts, the default's where it sets
// none.
func (e *engine) applyOverrides(p *plan, over netconf.Overrides) {
	p.policy, p.timeouts = over.Policy, over.Timeouts.Or(e.opts.timeouts)
}

// storedNetNS returns the netns path stored for an attachment, in its cache
// entry or else its order record, when a plugin may run in it. A stored
// path that fails [usableStoredNetNS] is logged, wherever it is stored.
func (e *engine) storedNetNS(s *knownAttachment, plog func() *logrus.Entry) string {
	netns, checked := "", ""
	for _, stored := range []struct{ path, from string }{
		{entryNetNS(s.entry), "a cache entry"},
		{recNetNS(s.rec), "an attachment order record"},
	} {
		if stored.path == "" || stored.path == checked {
			continue // usually both store one path: check it once
		}
		checked = stored.path
		path, err := usableStoredNetNS(stored.path)
		switch {
		case err != nil:
			plog().WithError(err).Warn("Ignoring the netns path of " + stored.from)
		case netns == "":
			netns = path
		}
	}
	return netns
}

func entryNetNS(e *cache.Entry) string {
	if e == nil {
		return ""
	}
	return e.NetNS
}

func recNetNS(a *cache.Attachment) string {
	if a == nil {
		return ""
	}
	return a.NetNS
}

// savedList returns the config saved with the attachment's order record,
// or nil when there is none or it cannot be used (logged).
func (e *engine) savedList(id string, s *knownAttachment, set *networkSet, plog func() *logrus.Entry) (*libcni.NetworkConfigList, netconf.Overrides) {
	if s.rec == nil || s.rec.Config == "" {
		return nil, netconf.Overrides{}
	}
	b, err := e.store.led.ReadConfig(id, s.rec.Config)
	if err == nil {
		list, over, perr := set.Stored(b, s.Name, "saved config "+s.rec.Config)
		if perr == nil {
			return list, over
		}
		err = perr
	}
	plog().WithField("config", s.rec.Config).WithError(err).Warn("Saved config unusable; falling back to the loaded config")
	return nil, netconf.Overrides{}
}

// file returns the path of the attachment's cache file, readable or corrupt,
// or "".
func (s *knownAttachment) file() string {
	switch {
	case s.entry != nil:
		return s.entry.Path
	case s.corrupt != nil:
		return s.corrupt.Path
	}
	return ""
}

// applyCacheRule sets what p, a plan of the known attachment with its
// config list, may do with the cache: p.file is the attachment's cache
// file, and p.cacheEntry says whether libcni may read it, as prevResult and
// to remove it: only an entry the inventory accepted, whose result libcni
// can decode at the list's version. Every plan that runs DEL or CHECK gets
// its cache rule here, so that libcni reads no entry the inventory did not
// accept. An accepted entry whose result libcni cannot use is logged.
func (s *knownAttachment) applyCacheRule(p *plan, plog func() *logrus.Entry) {
	p.file = s.file()
	if s.entry == nil {
		return
	}
	if err := s.entry.CheckLibcniResult(p.list.CNIVersion); err != nil {
		plog().WithError(err).Warn("libcni cannot use the cached result; running DEL without it and keeping the entry until DEL succeeds")
		return
	}
	p.cacheEntry = p.file
}

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
		rt.Args = [][2]string{ // the pairs ocicni sets for every pod
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", pod.ID},
			{"K8S_POD_UID", pod.UID},
		}
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
