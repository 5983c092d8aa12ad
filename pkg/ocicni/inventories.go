package ocicni

import (
	"slices"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// guessCorrupt returns listing's corrupt files, each whose content could
// not tell its container with the names guessed from its file name (see
// [cache.GuessNames]): around the container IDs of the order records in
// recs (readable or not), of the readable entries and of extraIDs, in
// that order, else after the name of a loaded network or of a readable
// entry's network. GC and [Manager.Inventories] name corrupt files so.
func guessCorrupt(listing cache.Listing, recs *records, set *networkSet, extraIDs ...string) []*cache.EntryError {
	if !slices.ContainsFunc(listing.Corrupt, func(ee *cache.EntryError) bool { return ee.Network == "" }) {
		return listing.Corrupt
	}
	ids, networks := slices.Clone(recs.ids), set.Names()
	for _, e := range listing.Entries {
		ids, networks = append(ids, e.ContainerID), append(networks, e.Network)
	}
	return cache.GuessNames(listing.Corrupt, dedupe(append(ids, extraIDs...)), dedupe(networks))
}

// dedupe drops the repeats from list, in place, keeping first occurrences.
func dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	return slices.DeleteFunc(list, func(s string) bool { dup := seen[s]; seen[s] = true; return dup })
}
