package ocicni

import (
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file decides what [Manager.GC] may act on (see [gcScope]). It drops
// what is out of scope from what GC planned from; it reads nothing and
// writes nothing, so what GC never plans for is never acted on, reported
// or rewritten.

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
// failures that GC may not act on (see [Manager.inScope]), and reports
// whether GC has work left on the sandbox: an attachment or a failure, or
// the links of a stray (see [Manager.scopeStrays]) to remove. The order
// record read into inv is kept whole, so the lines of the attachments
// dropped stay when GC prunes the record. An unreadable record recognises
// none of the sandbox's attachments.
func (c *collector) scopeStale(inv *inventory, set *networkSet, stray bool, log *logrus.Entry) bool {
	if c.opts.gcScope == gcAll {
		return true
	}
	before := len(inv.slots) + len(inv.failures)
	inv.slots = slices.DeleteFunc(inv.slots, func(s *slot) bool { return !c.inScope(set, s.Name, s.rec != nil) })
	inv.failures = slices.DeleteFunc(inv.failures, func(o Outcome) bool {
		return !c.inScope(set, o.Network, findLine(inv.record, o.Network, o.IfName) != nil)
	})
	left := len(inv.slots) + len(inv.failures)
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
