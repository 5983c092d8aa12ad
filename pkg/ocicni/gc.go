package ocicni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
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
//     rollback failed, or a crash during ADD) get DEL with the loaded
//     config. Without one they are reported as [Orphaned] and stay
//     recorded for the next GC.
//   - A valid pod's attachments are the union of the networks it names,
//     its cache entries, its order record and, when it names none, the
//     default network on eth0, so a pod never loses an attachment on a
//     network that is no longer the default.
//
// GC continues past every error and returns them joined, each naming its
// network. It holds the gate exclusively, so no ADD or DEL runs meanwhile
// (a plugin's GC would otherwise release a pod that is being set up), and
// it never modifies validPods.
func (m *Manager) GC(ctx context.Context, validPods []*PodNetwork) error {
	if err := m.gate.lock(ctx); err != nil {
		return fmt.Errorf("ocicni: waiting to GC: %w", err)
	}
	defer m.gate.unlock()
	log := m.log.WithField("verb", "GC")
	set := m.snapshot()

	listing, lerr := m.cache.List()
	recs, errs := m.readRecords()
	if lerr != nil {
		errs = append(errs, lerr)
	}
	entries := listing.Entries
	validIDs, valid, verrs := validAttachments(validPods, entries, recs, set)
	errs = append(errs, verrs...)

	var plans []*plan
	cached := map[attachmentKey]bool{}
	for _, e := range entries {
		cached[attachmentKey{e.ContainerID, e.Network, e.IfName}] = true
		if validIDs[e.ContainerID] {
			continue
		}
		p, err := m.planFor(&PodNetwork{ID: e.ContainerID}, "", NetAttachment{Name: e.Network, Ifname: e.IfName}, e, set, log)
		if err != nil {
			errs = append(errs, &NetworkError{Network: e.Network, IfName: e.IfName, Verb: "DEL", Err: err})
			continue
		}
		plans = append(plans, p)
	}
	known := append(slices.Collect(maps.Keys(recs.byID)), slices.Collect(maps.Keys(validIDs))...)
	for _, ee := range listing.Corrupt {
		p, perr := m.planCorrupt(ee, known, validIDs, recs, set, log)
		switch {
		case perr != nil:
			errs = append(errs, perr)
		case p != nil:
			plans = append(plans, p)
			cached[attachmentKey{p.id, p.Name, p.Ifname}] = true // planned here, so not again as uncached
		}
	}
	plans = append(plans, m.planUncached(recs, validIDs, cached, set, log)...)
	log.WithFields(logrus.Fields{"stale": len(plans), "validPods": len(validIDs)}).
		Info("GC deletes stale attachments and leaves those of valid pods untouched")

	outcomes := m.deleteAll(ctx, plans, log, "gc")
	for _, o := range outcomes {
		if o.Failure() {
			errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
		}
	}
	m.pruneRecords(recs, validIDs, outcomes, log)
	errs = append(errs, m.gcVerbs(ctx, set, valid)...)
	return errors.Join(errs...)
}

// gcVerbs sends the GC verb, with the valid attachments, to every loaded
// network at CNI 1.1.0 or later that does not set disableGC.
func (m *Manager) gcVerbs(ctx context.Context, set *networkSet, valid map[string][]types.GCAttachment) []error {
	var errs []error
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
	return errs
}

// attachmentKey names one attachment of one container.
type attachmentKey struct{ id, network, ifname string }

// records holds every attachment order record, read once per GC.
type records struct {
	byID    map[string][]cache.Attachment
	corrupt map[string]error // unreadable records, by container ID
}

// readRecords reads every order record. A listing failure is returned;
// unreadable records are kept in corrupt (and reported once: they are not
// errors of this GC, but they cannot guide it).
func (m *Manager) readRecords() (*records, []error) {
	recs := &records{byID: map[string][]cache.Attachment{}, corrupt: map[string]error{}}
	ids, err := m.cache.ListOrders()
	if err != nil {
		return recs, []error{err}
	}
	for _, id := range ids {
		atts, err := m.cache.ReadOrder(id)
		if err != nil {
			recs.corrupt[id] = err
			continue
		}
		recs.byID[id] = atts
	}
	return recs, nil
}

// validAttachments builds, per network, the attachments of valid pods: the
// networks they name, all cache entries of their sandbox IDs, their order
// records, and the default network on eth0 for pods that name none.
func validAttachments(pods []*PodNetwork, entries []*cache.Entry, recs *records, set *networkSet,
) (map[string]bool, map[string][]types.GCAttachment, []error) {
	ids := map[string]bool{}
	valid := map[string][]types.GCAttachment{}
	seen := map[attachmentKey]bool{}
	add := func(network, id, ifname string) {
		if k := (attachmentKey{id, network, ifname}); !seen[k] {
			seen[k] = true
			valid[network] = append(valid[network], types.GCAttachment{ContainerID: id, IfName: ifname})
		}
	}
	byID := make(map[string][]*cache.Entry, len(entries)) // one pass, not one per pod
	for _, e := range entries {
		byID[e.ContainerID] = append(byID[e.ContainerID], e)
	}
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
		for _, e := range byID[pod.ID] {
			add(e.Network, pod.ID, e.IfName)
		}
		for _, a := range recs.byID[pod.ID] {
			add(a.Network, pod.ID, a.IfName)
		}
		atts, err := assignIfnames(pod.Networks, set.defaultName)
		switch {
		case errors.Is(err, ErrNoDefaultNetwork): // names none, and there is no default
		case err != nil:
			errs = append(errs, fmt.Errorf("valid pod %s: %w", pod.ID, err))
		}
		for _, a := range atts {
			add(a.Name, pod.ID, a.Ifname)
		}
	}
	return ids, valid, errs
}

// planCorrupt plans the DEL of a corrupt cache entry with the loaded
// config of its network. It returns (nil, nil) for entries of valid pods,
// and an error when the entry cannot be collected.
func (m *Manager) planCorrupt(ee *cache.EntryError, knownIDs []string, validIDs map[string]bool, recs *records,
	set *networkSet, log *logrus.Entry,
) (*plan, error) {
	network, id, ifname := ee.Network, ee.ContainerID, ee.IfName
	if network == "" {
		network, id, ifname = cache.GuessFileName(ee.Path, knownIDs, set.names())
	}
	if validIDs[id] {
		return nil, nil
	}
	if set.byName[network] == nil {
		return nil, &NetworkError{
			Network: network, IfName: ifname, Verb: "DEL",
			Err: fmt.Errorf("%w (no loaded config to delete it with)", ee),
		}
	}
	netns := ""
	for _, a := range recs.byID[id] {
		if a.Network == network && a.IfName == ifname {
			netns = m.recordedNetNS(a, log)
		}
	}
	p, perr := m.planFor(&PodNetwork{ID: id}, netns, NetAttachment{Name: network, Ifname: ifname}, nil, set, log)
	if perr != nil {
		return nil, perr
	}
	p.entryPath, p.known = ee.Path, true
	return p, nil
}

// planUncached plans DELs for attachments that an order record lists but
// the cache lacks, for containers that are not valid. Attachments without
// a loaded config get a plan without a list: they are reported as
// [Orphaned] and stay recorded.
func (m *Manager) planUncached(recs *records, validIDs map[string]bool, cached map[attachmentKey]bool,
	set *networkSet, log *logrus.Entry,
) []*plan {
	var plans []*plan
	for _, id := range slices.Sorted(maps.Keys(recs.byID)) {
		if validIDs[id] {
			continue
		}
		for _, a := range recs.byID[id] {
			if cached[attachmentKey{id, a.Network, a.IfName}] {
				continue
			}
			att := NetAttachment{Name: a.Network, Ifname: a.IfName}
			p, err := m.planFor(&PodNetwork{ID: id}, m.recordedNetNS(a, log), att, nil, set, log)
			if err != nil { // cannot happen: the record's names were validated on read
				log.WithError(err).Warn("Cannot plan DEL of a recorded attachment")
				continue
			}
			p.known = true
			plans = append(plans, p)
		}
	}
	return plans
}

// pruneRecords updates the order records of invalid containers after GC's
// DELs (see [Manager.pruneOrder]). An unreadable record goes once no cache
// entry of its container is left, readable or corrupt.
func (m *Manager) pruneRecords(recs *records, validIDs map[string]bool, outcomes []Outcome, log *logrus.Entry) {
	for _, id := range slices.Sorted(maps.Keys(recs.byID)) {
		if !validIDs[id] {
			m.pruneOrder(id, recs.byID[id], nil, outcomes, log)
		}
	}
	if len(recs.corrupt) == 0 {
		return
	}
	left, lerr := m.cache.List()
	if lerr != nil {
		return // the cache cannot be read: keep every record
	}
	has := make(map[string]bool, len(left.Entries))
	for _, e := range left.Entries {
		has[e.ContainerID] = true
	}
	for _, ee := range left.Corrupt {
		for id := range recs.corrupt {
			if _, _, ok := cache.SplitFileName(filepath.Base(ee.Path), id); ok {
				has[id] = true
			}
		}
	}
	for id, rerr := range recs.corrupt {
		if validIDs[id] || has[id] {
			continue
		}
		log.WithError(rerr).Warn("Removing an unreadable attachment order record; no cache entry of its container is left")
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

// joinPath joins bin dirs into a CNI_PATH value.
func joinPath(dirs []string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
