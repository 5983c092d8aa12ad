package ocicni

import (
	"cmp"
	"errors"
	"maps"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file is the inventory of every sandbox of the node: one scan of
// the cache dir ([sandboxStore.scanNode]) that GC plans from and
// [Manager.Inventories] reports, [guessCorrupt], which names corrupt
// files for both, and the read-only view that [Manager.Inventory] and
// [Manager.Inventories] return. It takes no lock and runs no plugin.

// nodeScan is one reading of what the cache dir knows of every sandbox:
// one listing of the results directory, then one scan of the order
// records, in that order (a setup writes its record before its cache
// entry, so the record of a half-written entry is seen).
type nodeScan struct {
	listing cache.Listing
	byID    map[string][]*cache.Entry // the readable entries, by container
	recs    *records
}

// recover repairs what a crash left on the node (see [ledger.Ledger.Recover]):
// at the engine's start, and before GC reads the node. next says when it
// is tried again after a failure.
func (st *sandboxStore) recover(log *logrus.Entry, next string) {
	removed, err := st.led.Recover()
	if len(removed) > 0 {
		log.WithFields(logrus.Fields{"files": len(removed), "first": removed[0]}).
			Info("Removed the temporary files of writes that a crash cut short")
	}
	if err != nil {
		log.WithError(err).Warn("Cannot repair all that a crash left (record changes cut short, temporary files); " + next + " tries again")
	}
}

// scanNode reads the node's cache dir once (see [nodeScan]). It returns
// the failures to list the results or the records; what was read is
// usable either way, but incomplete.
func (st *sandboxStore) scanNode() (*nodeScan, []error) {
	node, errs := st.led.Scan()
	n := &nodeScan{listing: node.Listing, byID: make(map[string][]*cache.Entry, len(node.Listing.Entries)), recs: node.Records}
	for _, e := range node.Listing.Entries {
		n.byID[e.ContainerID] = append(n.byID[e.ContainerID], e)
	}
	return n, errs
}

// corruptByID names the scan's corrupt files (see [guessCorrupt], with
// extraIDs) and groups them by container. unowned are those that name no
// container even then; guessed holds the copies whose names were guessed.
func (n *nodeScan) corruptByID(set *networkSet, extraIDs ...string) (byID map[string][]*cache.EntryError,
	unowned []*cache.EntryError, guessed map[*cache.EntryError]bool,
) {
	byID = map[string][]*cache.EntryError{}
	guessed = map[*cache.EntryError]bool{}
	for i, ee := range guessCorrupt(n.listing, n.recs, set, extraIDs...) {
		guessed[ee] = ee != n.listing.Corrupt[i]
		if ee.Network == "" || ee.ContainerID == "" {
			unowned = append(unowned, ee)
			continue
		}
		byID[ee.ContainerID] = append(byID[ee.ContainerID], ee)
	}
	return byID, unowned, guessed
}

// ids returns, each once, every container the scan knows of: in the order
// the cache lists their entries, then those that only corrupt (a
// [nodeScan.corruptByID]) or an order record, readable or not, names.
func (n *nodeScan) ids(corrupt map[string][]*cache.EntryError) []string {
	ids := make([]string, 0, len(n.byID)+len(corrupt)+len(n.recs.IDs))
	for _, e := range n.listing.Entries {
		ids = append(ids, e.ContainerID)
	}
	ids = slices.Concat(ids, slices.Sorted(maps.Keys(corrupt)), n.recs.IDs)
	return dedupe(ids)
}

// inventory merges what the scan knows of sandbox id, with its corrupt
// files as [nodeScan.corruptByID] named them (see [mergeInventory]).
func (n *nodeScan) inventory(id string, corrupt []*cache.EntryError, set *networkSet) *inventory {
	return mergeInventory(id, n.recs.ByID[id], n.recs.Corrupt[id], n.byID[id], corrupt, set)
}

// readInventories reads the inventory of every sandbox that the cache or
// the order records know of, sorted by container ID, from one
// [sandboxStore.scanNode], as GC reads them. guessed holds the corrupt files
// whose names were guessed, and unowned the files that name no container
// even then.
func (st *sandboxStore) readInventories(set *networkSet) (invs []*inventory, unowned []*cache.EntryError,
	guessed map[*cache.EntryError]bool, err error,
) {
	n, errs := st.scanNode()
	if len(errs) > 0 {
		return nil, nil, nil, errs[0]
	}
	corrupt, unowned, guessed := n.corruptByID(set)
	ids := n.ids(corrupt)
	slices.Sort(ids)
	for _, id := range ids {
		invs = append(invs, n.inventory(id, corrupt[id], set))
	}
	return invs, unowned, guessed, nil
}

// SandboxInventory is what the manager knows of one sandbox's attachments
// from the cache dir: its libcni cache entries, readable or not, and its
// attachment order record, merged by the rule that teardown and GC act on
// (below). It is read for the call, without the sandbox's lock, so a pod
// operation running meanwhile may change what it describes; the caller
// may keep it.
//
// The attachment order records:
//
// Before the first ADD, setup writes the pod's attachments (network,
// ifname, netns, and the digest of the exact config each is added with,
// saved next to the record, one copy per distinct config) to a record
// outside libcni's results directory (see package cache). Both are
// written durably (fsync of the file, then of the directory) before any
// plugin receives an ADD config. The first plugin's process starts
// meanwhile, since starting it takes longer, and waits for its config on
// stdin; when the record cannot be written, it is killed without having
// read it and the setup fails with nothing attached (an executor set with
// [WithExec] is called only once the record is written). Whichever step
// failed, at whatever free space, the setup takes back the links and
// copies it made and the record it replaced, keeping what other records
// use; only the layout's directories stay. The error names the step and
// unwraps to the cause (syscall.ENOSPC). Teardown and GC need no free
// space. The shared copies of the configs saved last are kept when no
// record links them, for the next pod of the same config to link.
//
// An attachment leaves the record only once its DEL succeeded or its plugin
// said it is gone: after a teardown, a rollback or a GC that could not
// delete it, it is still recorded, whether or not its cache entry survived,
// with its retry state. The record goes when it is empty; GC removes saved
// configs that no record uses once they are 10 minutes old.
//
// Every path (setup, teardown, rollback, healing, status, forget, GC and
// [Manager.PendingTeardowns]) reads a sandbox's cache entries, record and
// saved configs through one merge, its inventory, so they agree on its
// attachments and on which entries libcni may read (see [ConfigError]).
// One writer writes and lists the records.
type SandboxInventory struct {
	ContainerID string
	// Attachments are the attachments it names, each (network, ifname)
	// once: those recorded at ADD first, in ADD order, then the others.
	Attachments []InventoryAttachment
	// Unusable are the sandbox's cache files, corrupt or unreadable, that
	// name no attachment: no DEL can act on them, and a teardown or GC
	// reports them and leaves them. A corrupt file that names one but has
	// no config to delete it with is an attachment whose Err is set.
	Unusable []*cache.EntryError
	// Recorded reports whether the sandbox has an order record, readable
	// or not; RecordErr is why it could not be read.
	Recorded  bool
	RecordErr error
}

// InventoryAttachment is one attachment of a [SandboxInventory].
type InventoryAttachment struct {
	NetAttachment
	// NetNS is the netns stored for it, in the order its DEL looks for
	// one: its cache entry's, else the one recorded at ADD.
	NetNS string
	// Entry is its readable cache entry, and Corrupt its cache file that
	// could not be read or parsed (errors.Is with [cache.ErrCorruptEntry]
	// tells corruption from a read failure). At most one is set; neither
	// when only the order record names it.
	Entry   *cache.Entry
	Corrupt *cache.EntryError
	// NamesGuessed is set when Corrupt's content could not tell its
	// container and its names were guessed from its file name, as GC
	// guesses them (see [Manager.Inventories]).
	NamesGuessed bool
	// Err is set when its cache file is corrupt and there is neither a
	// saved nor a loaded config to delete it with: no DEL can act on it,
	// and a teardown reports it as a failure and leaves the file.
	Err error
	// Record is its line in the order record (netns and config digest at
	// ADD, retry state), nil when the record does not name it; Pending is
	// that line's DEL retry, pending or given up, if any.
	Record  *cache.Attachment
	Pending *PendingTeardown
}

// CacheFile returns the path of the attachment's cache file, readable or
// not; "" when it has none.
func (a *InventoryAttachment) CacheFile() string {
	switch {
	case a.Entry != nil:
		return a.Entry.Path
	case a.Corrupt != nil:
		return a.Corrupt.Path
	}
	return ""
}

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
	ids, networks := slices.Clone(recs.IDs), set.Names()
	for _, e := range listing.Entries {
		ids, networks = append(ids, e.ContainerID), append(networks, e.Network)
	}
	return ledger.GuessNames(listing.Corrupt, dedupe(append(ids, extraIDs...)), dedupe(networks))
}

// dedupe drops the repeats from list, in place, keeping first occurrences.
func dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	return slices.DeleteFunc(list, func(s string) bool { dup := seen[s]; seen[s] = true; return dup })
}

// view returns what inv knows as a [SandboxInventory]; guessed holds the
// corrupt files whose names were guessed.
func (inv *inventory) view(guessed map[*cache.EntryError]bool) *SandboxInventory {
	sb := &SandboxInventory{ContainerID: inv.id, Recorded: inv.record != nil || inv.recordErr != nil, RecordErr: inv.recordErr}
	atts := inv.attachments()
	slices.SortStableFunc(atts, func(a, b NetAttachment) int {
		return cmp.Compare(recordPos(inv.record, a), recordPos(inv.record, b))
	})
	for _, att := range atts {
		sb.Attachments = append(sb.Attachments, inv.viewAttachment(att, guessed))
	}
	for _, o := range inv.failures {
		var ee *cache.EntryError
		if o.Network == "" && errors.As(o.Err, &ee) {
			sb.Unusable = append(sb.Unusable, ee)
		}
	}
	return sb
}

// viewAttachment describes att, a known attachment of inv or a failure whose file
// names it.
func (inv *inventory) viewAttachment(att NetAttachment, guessed map[*cache.EntryError]bool) InventoryAttachment {
	a := InventoryAttachment{NetAttachment: att}
	if s := inv.find(att.Name, att.Ifname); s != nil {
		a.Entry, a.Corrupt = s.entry, s.corrupt
	} else if i := slices.IndexFunc(inv.failures, func(o Outcome) bool {
		return o.Network == att.Name && o.IfName == att.Ifname
	}); i >= 0 {
		a.Err = inv.failures[i].Err
		errors.As(a.Err, &a.Corrupt)
	}
	a.NamesGuessed = a.Corrupt != nil && guessed[a.Corrupt]
	rec := findLine(inv.record, att.Name, att.Ifname)
	a.NetNS = cmp.Or(entryNetNS(a.Entry), recNetNS(rec))
	if rec != nil {
		line := *rec
		a.Record = &line
		if p, ok := pendingOf(inv.id, line); ok {
			a.Pending = &p
		}
	}
	return a
}

// recordPos returns the position of att's line in record, or len(record)
// when it has none.
func recordPos(record []cache.Attachment, att NetAttachment) int {
	if i := slices.IndexFunc(record, func(a cache.Attachment) bool { return a.Network == att.Name && a.IfName == att.Ifname }); i >= 0 {
		return i
	}
	return len(record)
}

// sandboxInventory is [Manager.Inventory]: see there.
func (st *sandboxStore) sandboxInventory(id string, set *networkSet) (*SandboxInventory, error) {
	if err := checkContainerID(id); err != nil {
		return nil, err
	}
	inv := st.readInventory(id, set)
	if inv.listErr != nil {
		return nil, inv.listErr
	}
	return inv.view(nil), nil
}

// sandboxInventories is [Manager.Inventories]: see there.
func (st *sandboxStore) sandboxInventories(set *networkSet) ([]*SandboxInventory, []*cache.EntryError, error) {
	invs, unowned, guessed, err := st.readInventories(set)
	if err != nil {
		return nil, nil, err
	}
	inventories := make([]*SandboxInventory, len(invs))
	for i, inv := range invs {
		inventories[i] = inv.view(guessed)
	}
	return inventories, unowned, nil
}
