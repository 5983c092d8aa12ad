package ocicni

import (
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file limits a GC to the loaded networks' attachments (see
// [WithGCScopedToLoadedNetworks]). It drops what is out of scope from
// what GC planned from; it reads nothing and writes nothing, so what GC
// never plans for is never acted on, reported or rewritten.

// inScope reports whether GC may act on an attachment of network: every
// network without the option, a loaded one with it. A file that names no
// network is out of scope with it.
func (m *Manager) inScope(set *networkSet, network string) bool {
	return !m.opts.gcLoadedOnly || network != "" && set.Network(network) != nil
}

// scopeUnowned returns the corrupt files that name no container that GC
// reports: all of them, or only those of a loaded network with the option.
func (m *Manager) scopeUnowned(unowned []*cache.EntryError, set *networkSet) []*cache.EntryError {
	return slices.DeleteFunc(unowned, func(ee *cache.EntryError) bool { return !m.inScope(set, ee.Network) })
}

// scopeStale drops from a stale sandbox's inventory the attachments and
// failures that GC may not act on (see [Manager.inScope]), and reports
// whether any is left. The order record read into inv is kept whole, so
// the lines of the attachments dropped stay when GC prunes the record.
func (m *Manager) scopeStale(inv *inventory, set *networkSet, log *logrus.Entry) bool {
	if !m.opts.gcLoadedOnly {
		return true
	}
	before := len(inv.slots) + len(inv.failures)
	inv.slots = slices.DeleteFunc(inv.slots, func(s *slot) bool { return !m.inScope(set, s.Name) })
	inv.failures = slices.DeleteFunc(inv.failures, func(o Outcome) bool { return !m.inScope(set, o.Network) })
	left := len(inv.slots) + len(inv.failures)
	if left < before && debugEnabled(log) {
		log.WithFields(logrus.Fields{"sandbox": inv.id, "leftAlone": before - left}).
			Debug("GC leaves the attachments of networks not loaded alone")
	}
	return left > 0
}
