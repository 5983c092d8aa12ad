package main

import (
	"cmp"
	"slices"
	"time"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// nodeStats counts the figures of stats from the library's inventories
// and the corrupt files that name no container (what Manager.Inventories
// returns), at now. The cache entries are counted from the rows "cache ls"
// prints, so that both mark duplicates and corrupt files alike; the
// pending teardowns are the retry states of the inventories' record
// lines, from the same reading.
func nodeStats(invs []*ocicni.SandboxInventory, unowned []*cache.EntryError, now time.Time) statsJSON {
	doc := statsJSON{At: now, Networks: []networkStatsJSON{}}
	byNetwork := map[string]*networkStatsJSON{}
	var pending []ocicni.PendingTeardown
	for _, inv := range invs {
		doc.Sandboxes.Total++
		if inv.Recorded {
			doc.Sandboxes.Recorded++
		}
		if inv.RecordErr != nil {
			doc.Sandboxes.UnreadableRecords++
		}
		if hasCacheFiles(inv) {
			doc.Sandboxes.Cached++
		}
		for i := range inv.Attachments {
			a := &inv.Attachments[i]
			n := byNetwork[a.Name]
			if n == nil {
				n = &networkStatsJSON{Network: a.Name}
				byNetwork[a.Name] = n
			}
			doc.Attachments++
			n.Attachments++
			if a.CacheFile() != "" {
				n.Cached++
			}
			if a.Pending != nil {
				n.Pending++
				pending = append(pending, *a.Pending)
			}
		}
	}
	for _, n := range byNetwork {
		doc.Networks = append(doc.Networks, *n)
	}
	slices.SortFunc(doc.Networks, func(a, b networkStatsJSON) int { return cmp.Compare(a.Network, b.Network) })
	doc.Entries = entryStats(listEntries(invs, unowned, nil), len(unowned))
	doc.Pending = pendingStats(pending, now)
	return doc
}

// entryStats counts the cache files of rows, as listEntries gives them;
// unowned of them name no container.
func entryStats(rows []entryJSON, unowned int) entryStatsJSON {
	st := entryStatsJSON{Total: len(rows), Unowned: unowned}
	for _, r := range rows {
		switch {
		case r.Corrupt:
			st.Corrupt++
		case r.Unreadable:
			st.Unreadable++
		}
		if r.Duplicate {
			st.Duplicate++
		}
	}
	return st
}

// pendingStats counts the pending teardowns at now: those given up, the
// retries due (next attempt at or before now), the earliest first failure
// and the next retry.
func pendingStats(pending []ocicni.PendingTeardown, now time.Time) pendingStatsJSON {
	st := pendingStatsJSON{Total: len(pending)}
	for _, p := range pending {
		if st.OldestSince == nil || p.Since.Before(*st.OldestSince) {
			since := p.Since
			st.OldestSince = &since
		}
		if p.GaveUp {
			st.GaveUp++
			continue
		}
		if !p.NextAttempt.After(now) {
			st.DueNow++
		}
		if st.NextAttempt == nil || p.NextAttempt.Before(*st.NextAttempt) {
			next := p.NextAttempt
			st.NextAttempt = &next
		}
	}
	if st.OldestSince != nil {
		st.OldestAgeSeconds = age(*st.OldestSince, now).Seconds()
	}
	return st
}
