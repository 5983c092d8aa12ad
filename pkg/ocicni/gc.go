package ocicni

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// GC deletes every attachment that does not belong to a pod in validPods,
// then sends the GC verb with the valid attachments to every loaded network
// at CNI 1.1.0 or later that does not set disableGC.
//
//   - Stale cache entries get DEL with their cached config, so attachments
//     of networks whose file was removed are collected too.
//   - Corrupt cache entries get DEL with the loaded config of their network,
//     where there is one, and are then removed.
//   - Attachments recorded at ADD but never cached (a failed setup whose
//     rollback failed) get DEL with the loaded config.
//   - A valid pod's attachments are all those the cache holds for its
//     sandbox ID plus the networks it names, so a pod never loses an
//     attachment on a network that is no longer the default.
//
// GC continues past every error and returns them joined, each naming its
// network. It holds the gate exclusively, so no ADD or DEL runs meanwhile
// (a plugin's GC would otherwise release a pod that is being set up), and
// it never modifies validPods.
func (m *Manager) GC(ctx context.Context, validPods []*PodNetwork) error {
	if m.closed.Load() {
		return ErrShutdown
	}
	if err := m.gate.lock(ctx); err != nil {
		return fmt.Errorf("ocicni: waiting to GC: %w", err)
	}
	defer m.gate.unlock()
	log := m.log.WithField("verb", "GC")
	set := m.snapshot()

	entries, lerr := m.cache.List()
	validIDs, valid, errs := m.validAttachments(validPods, entries)
	orderIDs, oerr := m.cache.ListOrders()
	if oerr != nil {
		errs = append(errs, oerr)
	}

	var plans []*plan
	kept := 0
	cached := map[NetAttachment]map[string]bool{} // (network, ifname) -> container IDs with an entry
	markCached := func(network, id, ifname string) {
		k := NetAttachment{Name: network, Ifname: ifname}
		if cached[k] == nil {
			cached[k] = map[string]bool{}
		}
		cached[k][id] = true
	}
	for _, e := range entries {
		markCached(e.Network, e.ContainerID, e.IfName)
		if validIDs[e.ContainerID] {
			kept++
			continue
		}
		p, err := m.planFor(&PodNetwork{ID: e.ContainerID}, NetAttachment{Name: e.Network, Ifname: e.IfName}, e, set)
		if err != nil {
			errs = append(errs, &NetworkError{Network: e.Network, IfName: e.IfName, Verb: "DEL", Err: err})
			continue
		}
		plans = append(plans, p)
	}
	log.WithFields(logrus.Fields{"kept": kept, "validPods": len(validIDs)}).
		Info("GC leaves the attachments of valid pods untouched")

	known := append(append([]string(nil), orderIDs...), keys(validIDs)...)
	for _, err := range flatten(lerr) {
		p, perr := m.planCorrupt(err, known, validIDs, set)
		switch {
		case perr != nil:
			log.WithError(err).Warn("Cannot collect corrupt CNI cache entry")
			errs = append(errs, perr)
		case p != nil:
			plans = append(plans, p)
			markCached(p.Name, p.rt.ContainerID, p.Ifname) // planned here, so not again as uncached
		}
	}
	plans = append(plans, m.planUncached(orderIDs, validIDs, cached, set, log)...)

	for _, o := range m.deleteAll(ctx, plans, log, "gc") {
		if o.Failure() {
			errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
		}
	}
	m.removeStaleOrders(orderIDs, validIDs, log)

	for _, name := range set.names() {
		n := set.byName[name]
		if n.list.DisableGC {
			continue
		}
		if ok, _ := version.GreaterThanOrEqualTo(n.list.CNIVersion, "1.1.0"); !ok {
			continue
		}
		va := valid[name]
		if va == nil {
			va = []types.GCAttachment{} // never nil: libcni reads nil as "delete everything"
		}
		if err := m.gcVerb(ctx, n.list, va); err != nil {
			errs = append(errs, &NetworkError{Network: name, Verb: "GC", Err: err})
		}
	}
	return errors.Join(errs...)
}

// validAttachments builds, per network, the attachments of valid pods: all
// cache entries of their sandbox IDs plus the networks they name.
func (m *Manager) validAttachments(pods []*PodNetwork, entries []*cache.Entry) (map[string]bool, map[string][]types.GCAttachment, []error) {
	ids := map[string]bool{}
	valid := map[string][]types.GCAttachment{}
	var errs []error
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if err := checkContainerID(pod.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		ids[pod.ID] = true
		for _, e := range entries {
			if e.ContainerID == pod.ID {
				valid[e.Network] = appendUnique(valid[e.Network], types.GCAttachment{ContainerID: pod.ID, IfName: e.IfName})
			}
		}
		if len(pod.Networks) == 0 {
			continue
		}
		atts, err := assignIfnames(pod.Networks, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("valid pod %s: %w", pod.ID, err))
			continue
		}
		for _, a := range atts {
			valid[a.Name] = appendUnique(valid[a.Name], types.GCAttachment{ContainerID: pod.ID, IfName: a.Ifname})
		}
	}
	return ids, valid, errs
}

// planCorrupt plans the DEL of a corrupt cache entry with the loaded
// config of its network. It returns (nil, nil) for entries of valid pods,
// and an error when the entry cannot be collected.
func (m *Manager) planCorrupt(err error, knownIDs []string, validIDs map[string]bool, set *networkSet) (*plan, error) {
	var ee *cache.EntryError
	if !errors.As(err, &ee) {
		return nil, err
	}
	network, id, ifname := ee.Network, ee.ContainerID, ee.IfName
	if network == "" || id == "" || ifname == "" {
		network, id, ifname = guessCacheName(filepath.Base(ee.Path), knownIDs, set)
	}
	if validIDs[id] {
		return nil, nil
	}
	n := set.byName[network]
	if n == nil || checkContainerID(id) != nil || checkName("interface name", ifname) != nil {
		return nil, &NetworkError{Network: network, IfName: ifname, Verb: "DEL",
			Err: fmt.Errorf("%w (no loaded config to delete it with)", err)}
	}
	rt, rerr := buildRuntimeConf(&PodNetwork{ID: id, NetNS: m.recordedNetNS(id, network, ifname)},
		NetAttachment{Name: network, Ifname: ifname})
	if rerr != nil {
		return nil, rerr
	}
	return &plan{NetAttachment: NetAttachment{Name: network, Ifname: ifname}, list: n.list, rt: rt,
		policy: n.policy, corrupt: ee.Path}, nil
}

// recordedNetNS returns the netns path recorded at ADD for an attachment,
// or "" when there is no record.
func (m *Manager) recordedNetNS(id, network, ifname string) string {
	atts, err := m.cache.ReadOrder(id)
	if err != nil {
		return ""
	}
	for _, a := range atts {
		if a.Network == network && a.IfName == ifname {
			return a.NetNS
		}
	}
	return ""
}

// guessCacheName splits a cache file name whose content is unreadable:
// exactly with a known container ID, else by a loaded network's name and
// the last dash.
func guessCacheName(name string, knownIDs []string, set *networkSet) (network, id, ifname string) {
	for _, known := range knownIDs {
		if n, i, ok := cache.SplitFileName(name, known); ok {
			return n, known, i
		}
	}
	for n := range set.byName {
		rest, ok := strings.CutPrefix(name, n+"-")
		if !ok {
			continue
		}
		if cut := strings.LastIndex(rest, "-"); cut > 0 && cut < len(rest)-1 {
			return n, rest[:cut], rest[cut+1:]
		}
	}
	return "", "", ""
}

// planUncached plans DELs for attachments that an order record lists but
// the cache lacks, for containers that are not valid.
func (m *Manager) planUncached(orderIDs []string, validIDs map[string]bool, cached map[NetAttachment]map[string]bool,
	set *networkSet, log *logrus.Entry,
) []*plan {
	var plans []*plan
	for _, id := range orderIDs {
		if validIDs[id] {
			continue
		}
		atts, err := m.cache.ReadOrder(id)
		if err != nil {
			log.WithError(err).Warn("Unreadable attachment order record")
			continue
		}
		for _, a := range atts {
			att := NetAttachment{Name: a.Network, Ifname: a.IfName}
			if cached[att][id] || set.byName[a.Network] == nil {
				continue
			}
			p, err := m.planFor(&PodNetwork{ID: id, NetNS: a.NetNS}, att, nil, set)
			if err == nil {
				plans = append(plans, p)
			}
		}
	}
	return plans
}

// removeStaleOrders drops the order records of invalid containers that no
// longer have cache entries, readable or corrupt (for those the record
// still holds the netns). One scan of the cache serves every record.
func (m *Manager) removeStaleOrders(orderIDs []string, validIDs map[string]bool, log *logrus.Entry) {
	left, lerr := m.cache.List()
	has := make(map[string]bool, len(left))
	for _, e := range left {
		has[e.ContainerID] = true
	}
	var corrupt []string
	for _, err := range flatten(lerr) {
		var ee *cache.EntryError
		if !errors.As(err, &ee) {
			return // the cache cannot be read: keep every record
		}
		corrupt = append(corrupt, filepath.Base(ee.Path))
	}
	for _, id := range orderIDs {
		if validIDs[id] || has[id] || slices.ContainsFunc(corrupt, func(name string) bool {
			_, _, ok := cache.SplitFileName(name, id)
			return ok
		}) {
			continue
		}
		if err := m.cache.RemoveOrder(id); err != nil {
			log.WithError(err).Warn("Cannot remove attachment order record")
		}
	}
}

// gcVerb sends GC to every plugin of the list with the valid attachments.
func (m *Manager) gcVerb(ctx context.Context, list *libcni.NetworkConfigList, valid []types.GCAttachment) error {
	inject := map[string]interface{}{
		"name":                      list.Name,
		"cniVersion":                list.CNIVersion,
		"cni.dev/valid-attachments": valid,
		"cni.dev/attachments":       valid, // the name an earlier spec draft used
	}
	var errs []error
	for _, p := range list.Plugins {
		conf, err := libcni.InjectConf(p, inject)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
			continue
		}
		path, err := m.exec.FindInPath(p.Network.Type, m.opts.binDirs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args := &invoke.Args{Command: "GC", Path: joinPath(m.opts.binDirs)}
		if err := invoke.ExecPluginWithoutResult(ctx, path, conf.Bytes, args, m.exec); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
		}
	}
	return errors.Join(errs...)
}

func appendUnique(list []types.GCAttachment, a types.GCAttachment) []types.GCAttachment {
	for _, x := range list {
		if x == a {
			return list
		}
	}
	return append(list, a)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
