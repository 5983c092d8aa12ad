package ocicni

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// gcPlan is what the planning phase of [Manager.GC] learnt, from one
// listing of the cache and one reading of the order records.
type gcPlan struct {
	validIDs map[string]bool
	valid    *validSet
	byID     map[string][]*cache.Entry // every readable entry, by container
	recs     *records
	stale    []*staleContainer // in the order planned
}

// staleContainer is the work for one container that no valid pod owns:
// its DELs, run in order under the container's lock, and its order record
// to prune afterwards.
type staleContainer struct {
	id    string
	plans []*stalePlan
}

// stalePlan is a DEL planned by GC, and where it was planned from.
type stalePlan struct {
	*plan
	// from is the cache file the plan was made from; "" when only the
	// order record names the attachment. The DEL runs only if the source
	// is still there once GC holds the container's lock: a teardown that
	// ran in between took it away.
	from string
}

// attachmentKey names one attachment of one container.
type attachmentKey struct{ id, network, ifname string }

// validSet holds, per network, the attachments that the GC verb must keep,
// each once.
type validSet struct {
	seen  map[attachmentKey]bool
	byNet map[string][]types.GCAttachment
}

func newValidSet() *validSet {
	return &validSet{seen: map[attachmentKey]bool{}, byNet: map[string][]types.GCAttachment{}}
}

func (v *validSet) add(network, id, ifname string) {
	if k := (attachmentKey{id, network, ifname}); !v.seen[k] {
		v.seen[k] = true
		v.byNet[network] = append(v.byNet[network], types.GCAttachment{ContainerID: id, IfName: ifname})
	}
}

// records holds every attachment order record, read once per GC.
type records struct {
	byID    map[string][]cache.Attachment
	corrupt map[string]error // unreadable records, by container ID
}

// planGC lists the cache once, reads the order records once, and plans
// the DELs of every attachment that neither a valid pod nor a setup seen
// by watch owns. It takes no lock: what it reads may change before the
// DELs run, which recheck under each container's lock.
func (m *Manager) planGC(validPods []*PodNetwork, set *networkSet, watch *setupWatch, log *logrus.Entry) (*gcPlan, []error) {
	// The records are read after the listing: a setup writes its record
	// before its cache entry, so a half-written entry's record is seen.
	listing, lerr := m.cache.List()
	recs, errs := m.readRecords()
	if lerr != nil {
		errs = append(errs, lerr)
	}
	g := &gcPlan{recs: recs, byID: make(map[string][]*cache.Entry, len(listing.Entries))}
	for _, e := range listing.Entries {
		g.byID[e.ContainerID] = append(g.byID[e.ContainerID], e)
	}
	var verrs []error
	g.validIDs, g.valid, verrs = validAttachments(validPods, g.byID, recs, set)
	errs = append(errs, verrs...)
	keep := func(id string) bool { return g.validIDs[id] || watch.touched(id) }

	st := &staleSet{byID: map[string]*staleContainer{}}
	cached := map[attachmentKey]bool{}
	for _, e := range listing.Entries {
		cached[attachmentKey{e.ContainerID, e.Network, e.IfName}] = true
		if keep(e.ContainerID) {
			continue
		}
		p, err := m.planFor(&PodNetwork{ID: e.ContainerID}, "", NetAttachment{Name: e.Network, Ifname: e.IfName}, e, set, log)
		if err != nil {
			errs = append(errs, &NetworkError{Network: e.Network, IfName: e.IfName, Verb: "DEL", Err: err})
			continue
		}
		st.add(p, e.Path)
	}
	known := slices.Concat(slices.Collect(maps.Keys(recs.byID)), slices.Collect(maps.Keys(g.validIDs)), watch.ids())
	for _, ee := range listing.Corrupt {
		p, perr := m.planCorrupt(ee, known, keep, recs, set, log)
		switch {
		case perr != nil:
			errs = append(errs, perr)
		case p != nil:
			st.add(p, p.entryPath)
			cached[attachmentKey{p.id, p.Name, p.Ifname}] = true // planned here, so not again as uncached
		}
	}
	for _, p := range m.planUncached(recs, keep, cached, set, log) {
		st.add(p, "")
	}
	// Containers with a record but nothing to delete still get their
	// record pruned, as a teardown would.
	for _, id := range slices.Concat(slices.Sorted(maps.Keys(recs.byID)), slices.Sorted(maps.Keys(recs.corrupt))) {
		if !keep(id) {
			st.container(id)
		}
	}
	g.stale = st.list
	return g, errs
}

// staleSet gathers the stale containers' plans, by container, in the
// order the containers were first planned.
type staleSet struct {
	byID map[string]*staleContainer
	list []*staleContainer
}

func (s *staleSet) container(id string) *staleContainer {
	sc := s.byID[id]
	if sc == nil {
		sc = &staleContainer{id: id}
		s.byID[id] = sc
		s.list = append(s.list, sc)
	}
	return sc
}

func (s *staleSet) add(p *plan, from string) {
	sc := s.container(p.id)
	sc.plans = append(sc.plans, &stalePlan{plan: p, from: from})
}

// readRecords reads every order record. A listing failure is returned;
// unreadable records are kept in corrupt (and reported once: they are not
// errors of this GC, but they cannot guide it). A record removed since the
// listing is skipped.
func (m *Manager) readRecords() (*records, []error) {
	recs := &records{byID: map[string][]cache.Attachment{}, corrupt: map[string]error{}}
	ids, err := m.cache.ListOrders()
	if err != nil {
		return recs, []error{err}
	}
	for _, id := range ids {
		atts, err := m.cache.ReadOrder(id)
		switch {
		case err != nil:
			recs.corrupt[id] = err
		case atts != nil:
			recs.byID[id] = atts
		}
	}
	return recs, nil
}

// validAttachments builds, per network, the attachments of valid pods: the
// networks they name, all cache entries of their sandbox IDs (byID), their
// order records, and the default network on eth0 for pods that name none.
func validAttachments(pods []*PodNetwork, byID map[string][]*cache.Entry, recs *records, set *networkSet,
) (map[string]bool, *validSet, []error) {
	ids := map[string]bool{}
	valid := newValidSet()
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
			valid.add(e.Network, pod.ID, e.IfName)
		}
		for _, a := range recs.byID[pod.ID] {
			valid.add(a.Network, pod.ID, a.IfName)
		}
		atts, err := assignIfnames(pod.Networks, set.defaultName)
		switch {
		case errors.Is(err, ErrNoDefaultNetwork): // names none, and there is no default
		case err != nil:
			errs = append(errs, fmt.Errorf("valid pod %s: %w", pod.ID, err))
		}
		for _, a := range atts {
			valid.add(a.Name, pod.ID, a.Ifname)
		}
	}
	return ids, valid, errs
}

// planCorrupt plans the DEL of a corrupt cache entry with the loaded
// config of its network. It returns (nil, nil) for entries of containers
// to keep, and an error when the entry cannot be collected.
func (m *Manager) planCorrupt(ee *cache.EntryError, knownIDs []string, keep func(id string) bool, recs *records,
	set *networkSet, log *logrus.Entry,
) (*plan, error) {
	network, id, ifname := ee.Network, ee.ContainerID, ee.IfName
	if network == "" {
		network, id, ifname = cache.GuessFileName(ee.Path, knownIDs, set.names())
	}
	if keep(id) {
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
// the cache lacks, for containers not to keep. Attachments without a
// loaded config get a plan without a list: they are reported as
// [Orphaned] and stay recorded.
func (m *Manager) planUncached(recs *records, keep func(id string) bool, cached map[attachmentKey]bool,
	set *networkSet, log *logrus.Entry,
) []*plan {
	var plans []*plan
	for _, id := range slices.Sorted(maps.Keys(recs.byID)) {
		if keep(id) {
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
