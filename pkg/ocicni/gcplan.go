package ocicni

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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
	// unplanned are the corrupt cache files that name no container GC
	// could tell, as Failed outcomes; they stay for the next GC.
	unplanned []Outcome
}

// staleContainer is the work for one container that no valid pod owns:
// its DELs, run in order under the container's lock, and its order record
// to prune afterwards.
type staleContainer struct {
	id    string
	plans []*plan // in teardown order; each DEL runs only if its source is still there (see Manager.stillStale)
	// failures are the container's attachments that no DEL can act on
	// (see [inventory]) or that could not be planned, as Failed outcomes.
	failures []Outcome
	// strays is set when only links to saved configs name the container
	// (a setup killed before its record was written): GC removes them.
	strays bool
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

// addAll adds every attachment inv names, as sandbox id's.
func (v *validSet) addAll(id string, inv *inventory) {
	for _, a := range inv.attachments() {
		if k := (attachmentKey{id, a.Name, a.Ifname}); !v.seen[k] {
			v.seen[k] = true
			v.byNet[a.Name] = append(v.byNet[a.Name], types.GCAttachment{ContainerID: id, IfName: a.Ifname})
		}
	}
}

// planGC lists the cache once, reads the order records once, and plans
// the DELs of every attachment that neither a valid pod nor a setup seen
// by watch owns: for each other container, what of its inventory (see
// [store.scanNode]) is in GC's scope (see [Manager.scopeStale]). It takes
// no lock: what it reads may change before the DELs run, which recheck
// under each container's lock.
func (c *collector) planGC(validPods []*PodNetwork, set *networkSet, watch *setupWatch, log *logrus.Entry) (*gcPlan, []error) {
	if err := c.store.led.RecoverCommits(); err != nil {
		log.WithError(err).Warn("Cannot list the record changes that a crash cut short; the next GC tries again")
	}
	n, errs := c.store.scanNode()
	var strays []string // only from a complete listing
	if len(errs) == 0 {
		c.sweepConfigs(n.recs, log)
		if err := c.store.led.SweepLocks(n.recs.IDs); err != nil {
			log.WithError(err).Warn("Cannot list the sandboxes' lock files; the next GC removes those left")
		}
		strays = c.scopeStrays(n.recs)
	}
	g := &gcPlan{recs: n.recs, byID: n.byID}
	var verrs []error
	g.validIDs, g.valid, verrs = validAttachments(validPods, g.byID, n.recs, set)
	errs = append(errs, verrs...)
	keep := func(id string) bool { return g.validIDs[id] || watch.touched(id) }

	// Corrupt files are named also around the IDs of the valid pods and of
	// the setups watch saw; one that still names nothing is a Failed
	// outcome, left for the next GC.
	corrupt, unowned, _ := n.corruptByID(set, slices.Concat(slices.Sorted(maps.Keys(g.validIDs)), watch.ids())...)
	for _, ee := range c.scopeUnowned(unowned, set) {
		g.unplanned = append(g.unplanned, Outcome{ContainerID: ee.ContainerID, Network: ee.Network, IfName: ee.IfName, Class: Failed, Err: ee})
		errs = append(errs, &NetworkError{Verb: "DEL", Err: ee})
	}
	st := &staleSet{byID: map[string]*staleContainer{}}
	for _, id := range dedupe(append(n.ids(corrupt), strays...)) {
		if keep(id) {
			continue
		}
		inv := n.inventory(id, corrupt[id], set)
		_, stray := slices.BinarySearch(strays, id)
		if !c.scopeStale(inv, set, stray, log) {
			continue // nothing in GC's scope: another runtime's, or a network not loaded
		}
		sc := st.container(id) // with nothing to delete, its record is still pruned, as a teardown would
		sc.strays = stray
		logInventory(inv, log)
		errs = append(errs, c.planStale(sc, inv, set, log)...)
	}
	g.stale = st.list
	return g, errs
}

// planStale plans the DELs of stale container sc from its inventory, in
// teardown order. What no DEL can act on, and what cannot be planned, goes
// to sc.failures; it returns them as errors too.
func (c *collector) planStale(sc *staleContainer, inv *inventory, set *networkSet, log *logrus.Entry) []error {
	var errs []error
	sortSlotsForTeardown(inv.slots, inv.record)
	for _, o := range inv.failures {
		errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
	}
	sc.failures = append(sc.failures, inv.failures...)
	for _, s := range inv.slots {
		p, err := c.planFor(&PodNetwork{ID: sc.id}, "", s, set, log)
		if err != nil {
			errs = append(errs, &NetworkError{Network: s.Name, IfName: s.Ifname, Verb: "DEL", Err: err})
			sc.failures = append(sc.failures, Outcome{ContainerID: sc.id, Network: s.Name, IfName: s.Ifname, Class: Failed, Err: err})
			continue
		}
		sc.plans = append(sc.plans, p)
	}
	return errs
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

// validAttachments builds, per network, the attachments of valid pods:
// for each, everything its inventory holds (cache entries, order record)
// and what it asks for (the networks it names, or the default network on
// eth0 when it names none).
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
		inv := mergeInventory(pod.ID, recs.ByID[pod.ID], recs.Corrupt[pod.ID], byID[pod.ID], nil, set)
		atts, err := assignIfnames(pod.Networks, set.DefaultName())
		switch {
		case errors.Is(err, ErrNoDefaultNetwork): // names none, and there is no default
		case err != nil:
			errs = append(errs, fmt.Errorf("valid pod %s: %w", pod.ID, err))
		}
		inv.include(atts)
		valid.addAll(pod.ID, inv)
	}
	return ids, valid, errs
}

// strayIDs returns, sorted, the containers that links to saved configs
// name but that have no order record, readable or not.
func strayIDs(recs *records) []string {
	var out []string
	for _, sc := range recs.Saved {
		_, recorded := recs.ByID[sc.ContainerID]
		_, unreadable := recs.Corrupt[sc.ContainerID]
		if sc.ContainerID != "" && !recorded && !unreadable && !slices.Contains(out, sc.ContainerID) {
			out = append(out, sc.ContainerID)
		}
	}
	slices.Sort(out)
	return out
}

// savedConfigGrace is how recently a shared copy of a saved config must
// have changed for GC to keep it although no record it read uses it: a
// setup saves a config just before it writes the record that uses it,
// possibly after GC read the records.
const savedConfigGrace = 10 * time.Minute

// sweepConfigs removes the shared copies of saved configs that no record
// links or uses (a crash between saving a config and writing its record,
// links lost with a power loss, or the copies a Cache keeps for its next
// setups) once they are older than [savedConfigGrace]. Links whose record
// is gone are removed with their container, under its lock (see
// [Manager.deleteStaleContainer]). recs holds the records GC read and the
// saved configs listed with them. Failures are logged: a file left behind
// costs only disk space until the next GC.
func (c *collector) sweepConfigs(recs *records, log *logrus.Entry) {
	used := map[string]bool{}
	for _, record := range recs.ByID {
		for _, a := range record {
			used[a.Config] = true
		}
	}
	cutoff := time.Now().Add(-c.opts.configGrace)
	for _, sc := range recs.Saved {
		if sc.ContainerID != "" || sc.Links != 1 || used[sc.Digest] || sc.Changed.After(cutoff) {
			continue
		}
		if err := c.store.led.RemoveUnusedConfig(sc); err != nil {
			log.WithError(err).Warn("Cannot remove an unused saved config")
		} else if debugEnabled(log) {
			log.WithFields(logrus.Fields{"config": sc.Digest, "file": sc.Path}).Debug("Removed an unused saved config")
		}
	}
}
