package ocicni

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"

	"github.com/containernetworking/cni/pkg/types"
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
	plans []*plan // in teardown order; each DEL runs only if its source is still there (see collector.stillStale)
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
// [sandboxStore.scanNode]) is in GC's scope (see [collector.scopeStale]). It takes
// no lock: what it reads may change before the DELs run, which recheck
// under each container's lock.
func (c *collector) planGC(validPods []*PodNetwork, set *networkSet, watch *setupWatch, log *logrus.Entry) (*gcPlan, []error) {
	c.store.recover(log, "the next GC")
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
	sortForTeardown(inv.known, inv.record)
	for _, o := range inv.failures {
		errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
	}
	sc.failures = append(sc.failures, inv.failures...)
	for _, s := range inv.known {
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
// [collector.deleteStaleContainer]). recs holds the records GC read and the
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

// Whether an attachment is stale, and so GC's to delete, is decided here
// and nowhere else, in three steps: at planning, it belongs to no valid
// pod and no setup seen since GC began (the keep rule of [collector.planGC])
// and it is in GC's scope (see [gcScope]: what is out of scope is dropped
// from what GC planned from, so it is never acted on, reported or
// rewritten); under the sandbox's locks, it is still there
// ([collector.stillStale]) and nobody began working on the sandbox
// meanwhile ([collector.leaveAlone]).

// gcScope is which stale attachments GC acts on. The cache dir may be
// shared with other runtimes (the default one, /var/lib/cni, is), and
// only the order records tell this library's attachments from theirs.
type gcScope uint8

const (
	// gcOwned, the default, covers what this library owns: the attachments
	// the order records name, of any network, loaded or not, and the
	// others of the loaded networks.
	gcOwned gcScope = iota
	// gcLoaded covers the attachments of the loaded networks only,
	// recorded or not (see [WithGCScopedToLoadedNetworks]).
	gcLoaded
	// gcAll covers every attachment in the cache dir, whichever runtime
	// made it (see [WithGCAllNetworks]).
	gcAll
)

// inScope reports whether GC may act on an attachment of network, named
// by its sandbox's readable order record or not (recorded). A file that
// names no network is in scope only under gcAll: neither a record nor a
// loaded network can claim it.
func (c *collector) inScope(set *networkSet, network string, recorded bool) bool {
	loaded := network != "" && set.Network(network) != nil
	switch c.opts.gcScope {
	case gcAll:
		return true
	case gcLoaded:
		return loaded
	default:
		return loaded || recorded
	}
}

// scopeUnowned returns the corrupt files that name no container that GC
// reports: all of them under gcAll, else only those of a loaded network.
func (c *collector) scopeUnowned(unowned []*cache.EntryError, set *networkSet) []*cache.EntryError {
	return slices.DeleteFunc(unowned, func(ee *cache.EntryError) bool { return !c.inScope(set, ee.Network, false) })
}

// scopeStrays returns the sandboxes whose links to saved configs GC
// removes because they have no order record (see [strayIDs]): none under
// gcLoaded, which cannot tell their network without reading them.
func (c *collector) scopeStrays(recs *records) []string {
	if c.opts.gcScope == gcLoaded {
		return nil
	}
	return strayIDs(recs)
}

// scopeStale drops from a stale sandbox's inventory the attachments and
// failures that GC may not act on (see [collector.inScope]), and reports
// whether GC has work left on the sandbox: an attachment or a failure, or
// the links of a stray (see [collector.scopeStrays]) to remove. The order
// record read into inv is kept whole, so the lines of the attachments
// dropped stay when GC prunes the record. An unreadable record recognises
// none of the sandbox's attachments.
func (c *collector) scopeStale(inv *inventory, set *networkSet, stray bool, log *logrus.Entry) bool {
	if c.opts.gcScope == gcAll {
		return true
	}
	before := len(inv.known) + len(inv.failures)
	inv.known = slices.DeleteFunc(inv.known, func(s *knownAttachment) bool { return !c.inScope(set, s.Name, s.rec != nil) })
	inv.failures = slices.DeleteFunc(inv.failures, func(o Outcome) bool {
		return !c.inScope(set, o.Network, findLine(inv.record, o.Network, o.IfName) != nil)
	})
	left := len(inv.known) + len(inv.failures)
	if left < before && debugEnabled(log) {
		log.WithFields(logrus.Fields{"sandbox": inv.id, "leftAlone": before - left}).
			Debug("GC leaves alone the attachments that are out of its scope")
	}
	return left > 0 || stray
}

// scopeKeepsUnreadableRecords reports whether GC leaves an unreadable
// order record as it is, rather than replace or remove it: it may name
// attachments out of scope, or that only it claims for this library.
func (c *collector) scopeKeepsUnreadableRecords() bool { return c.opts.gcScope != gcAll }

// leaveAlone reports, and logs, whether GC must leave sandbox id alone
// although it planned to delete it, now that it holds its locks (l): a
// setup of it began while GC ran, or another engine worked on it lately.
func (c *collector) leaveAlone(l *podLocks, id string, watch *setupWatch, log *logrus.Entry) bool {
	switch {
	case watch.touched(id):
		log.Info("GC leaves a sandbox alone: its setup began while GC ran")
		return true
	case c.othersWorkedOn(l.sandbox.file.LastRelease(), watch):
		log.Info("GC leaves a sandbox alone: another engine worked on it while GC ran")
		return true
	}
	return false
}

// stillStale reports whether what GC planned p from is still there: its
// cache file, or its line in the container's order record as read now. A
// teardown that ran in between took both away; [Manager.ForgetPodCache]
// took the file but recorded the attachment, which GC must then delete.
// When the file's existence cannot be told, the DEL runs: it is
// idempotent.
func (c *collector) stillStale(p *plan, recorded []cache.Attachment) bool {
	if p.file != "" {
		if ok, err := c.store.led.EntryExists(p.file); ok || err != nil {
			return true
		}
	}
	return slices.ContainsFunc(recorded, func(a cache.Attachment) bool {
		return a.Network == p.Name && a.IfName == p.Ifname
	})
}
