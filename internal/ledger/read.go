package ledger

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Sandbox is all that the ledger holds of one sandbox.
type Sandbox struct {
	ID string
	// Record is its order record, nil when it has none; RecordErr is why
	// it could not be read.
	Record    []cache.Attachment
	RecordErr error
	// Entries are its readable cache entries, and Corrupt its cache files
	// that could not be read or parsed; ListErr is why its files could
	// not be listed (they are then incomplete).
	Entries []*cache.Entry
	Corrupt []*cache.EntryError
	ListErr error
}

// Read returns what the ledger holds of sandbox id.
func (l *Ledger) Read(id string) Sandbox {
	record, rerr := l.c.ReadOrder(id)
	listing, err := l.c.ForContainer(id)
	return Sandbox{ID: id, Record: record, RecordErr: rerr, Entries: listing.Entries, Corrupt: listing.Corrupt, ListErr: err}
}

// Named is one attachment's cache file, as [Ledger.ReadNamed] finds it.
type Named struct {
	Entry   *cache.Entry      // readable
	Corrupt *cache.EntryError // corrupt; a file that cannot be read for another reason counts as none
}

// ReadNamed returns sandbox id's record (in the Sandbox, without its
// listing) and the cache file of each (network, ifname) of names, in
// order: for a caller that acts on named attachments only.
func (l *Ledger) ReadNamed(id string, names [][2]string) (Sandbox, []Named) {
	record, rerr := l.c.ReadOrder(id)
	out := make([]Named, len(names))
	for i, n := range names {
		e, err := l.c.Get(n[0], id, n[1])
		var ee *cache.EntryError
		switch {
		case err == nil:
			out[i].Entry = e
		case errors.Is(err, cache.ErrCorruptEntry) && errors.As(err, &ee):
			out[i].Corrupt = ee
		}
	}
	return Sandbox{ID: id, Record: record, RecordErr: rerr}, out
}

// ReadRecord reads sandbox id's order record alone: nil when it has none.
func (l *Ledger) ReadRecord(id string) ([]cache.Attachment, error) { return l.c.ReadOrder(id) }

// HasFiles reports whether any cache file of sandbox id is left,
// readable or corrupt.
func (l *Ledger) HasFiles(id string) (bool, error) {
	left, err := l.c.ForContainer(id)
	return len(left.Entries) > 0 || len(left.Corrupt) > 0, err
}

// EntryExists reports whether the cache file at path is still there.
func (l *Ledger) EntryExists(path string) (bool, error) { return l.c.Exists(path) }

// ReadConfig returns the config saved with sandbox id's record under
// digest.
func (l *Ledger) ReadConfig(id, digest string) ([]byte, error) { return l.c.ReadConfig(id, digest) }

// ConfigDigest returns the digest under which a config would be saved.
func ConfigDigest(b []byte) string { return cache.ConfigDigest(b) }

// Records are every order record of the node, read by one scan.
type Records struct {
	IDs     []string // every record's sandbox, sorted
	ByID    map[string][]cache.Attachment
	Corrupt map[string]error // unreadable records, by sandbox
	// Saved are the shared copies of the saved configs and the records'
	// links to them, listed with the records.
	Saved []cache.SavedConfig
}

// ScanRecords reads every order record, and lists the saved configs
// with them (one listing of the records' directory). A listing failure
// is returned with what was read; unreadable records are in Corrupt. A
// record removed since the listing is left out.
func (l *Ledger) ScanRecords() (*Records, error) {
	recs := &Records{ByID: map[string][]cache.Attachment{}, Corrupt: map[string]error{}}
	ids, saved, err := l.c.ListOrdersAndConfigs()
	if err != nil {
		return recs, err
	}
	recs.Saved = saved
	for _, id := range ids {
		atts, err := l.c.ReadOrder(id)
		switch {
		case err != nil:
			recs.Corrupt[id] = err
		case atts != nil:
			recs.ByID[id] = atts
		default:
			continue
		}
		recs.IDs = append(recs.IDs, id)
	}
	return recs, nil
}

// Node is one reading of the whole node: one listing of the results
// directory, then one scan of the records, in that order (a setup writes
// its record before its cache entry, so the record of a half-written
// entry is seen).
type Node struct {
	Listing cache.Listing
	Records *Records
}

// Scan reads the node once (see [Node]). It returns the failures to list
// the results or the records; what was read is usable either way, but
// incomplete.
func (l *Ledger) Scan() (*Node, []error) {
	var errs []error
	listing, err := l.c.List()
	if err != nil {
		errs = append(errs, err)
	}
	recs, err := l.ScanRecords()
	if err != nil {
		errs = append(errs, err)
	}
	return &Node{Listing: listing, Records: recs}, errs
}

// GuessNames names the corrupt files whose content could not tell their
// container from their file names, with knownIDs and networks (see
// [cache.GuessNames]).
func GuessNames(corrupt []*cache.EntryError, knownIDs, networks []string) []*cache.EntryError {
	return cache.GuessNames(corrupt, knownIDs, networks)
}

// ConvertResult converts a cached result to cniVersion (see
// [cache.Convert]).
func ConvertResult(res types.Result, cniVersion string) (types.Result, error) {
	return cache.Convert(res, cniVersion)
}
