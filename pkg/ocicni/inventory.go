package ocicni

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// slot is one attachment of a sandbox, with everything known of it.
type slot struct {
	NetAttachment
	entry   *cache.Entry      // its readable cache entry, or nil
	corrupt *cache.EntryError // its corrupt cache file, or nil
	rec     *cache.Attachment // its line in the order record (saved config, netns, heal state), or nil
}

// onDisk reports whether anything on disk names the attachment, so that it
// may exist: having no config to delete it with is then a failure
// ([Orphaned]), not a warning.
func (s *slot) onDisk() bool { return s.entry != nil || s.corrupt != nil || s.rec != nil }

// corruptPath returns the path of the slot's corrupt cache file, or "".
func (s *slot) corruptPath() string {
	if s.corrupt == nil {
		return ""
	}
	return s.corrupt.Path
}

// inventory is what is known of one sandbox's attachments: the networks a
// request names, the libcni cache entries, and the order record with its
// saved configs and pending heals. It is the one answer to "which
// attachments does this sandbox have"; teardown, healing and GC act on it.
type inventory struct {
	id    string
	slots []*slot // each (network, ifname) once
	// record is the order record as read (nil: none); recordErr says why
	// it could not be read.
	record    []cache.Attachment
	recordErr error
	// failures are what no DEL can act on: a cache that cannot be listed
	// (listErr), corrupt files that name no attachment or have no config
	// to delete them with. They stay on disk for the next teardown or GC.
	failures []Outcome
	listErr  error
}

// cacheFiles returns the paths of the sandbox's cache files, readable or
// corrupt, with the attachment each names ("" for a corrupt file whose
// name names none) and its slot, if it has one.
func (inv *inventory) cacheFiles() []cacheFile {
	var out []cacheFile
	for _, s := range inv.slots {
		switch {
		case s.entry != nil:
			out = append(out, cacheFile{path: s.entry.Path, slot: s})
		case s.corrupt != nil:
			out = append(out, cacheFile{path: s.corrupt.Path, slot: s})
		}
	}
	for _, o := range inv.failures {
		var ee *cache.EntryError
		if errors.As(o.Err, &ee) {
			out = append(out, cacheFile{path: ee.Path, network: ee.Network, ifname: ee.IfName})
		}
	}
	return out
}

// cacheFile is one cache file of a sandbox.
type cacheFile struct {
	path            string
	slot            *slot  // nil for a corrupt file no DEL can act on
	network, ifname string // what such a file's name names, if anything
}

// names returns the network and ifname the file stands for; "" when a
// corrupt file's name names none.
func (f cacheFile) names() (network, ifname string) {
	if f.slot != nil {
		return f.slot.Name, f.slot.Ifname
	}
	return f.network, f.ifname
}

// takeInventory reads what is known of sandbox id's attachments. With
// requested attachments it holds exactly those, in the order given;
// otherwise every attachment that the cache or the order record knows of
// (see [newInventory]).
func (m *Manager) takeInventory(id string, requested []NetAttachment, set *networkSet, log *logrus.Entry) *inventory {
	record, rerr := m.cache.ReadOrder(id)
	return m.inventoryOf(id, requested, record, rerr, set, log)
}

// inventoryOf is [Manager.takeInventory] with the order record already
// read (record, rerr).
func (m *Manager) inventoryOf(id string, requested []NetAttachment, record []cache.Attachment, rerr error,
	set *networkSet, log *logrus.Entry,
) *inventory {
	if len(requested) == 0 {
		listing, err := m.cache.ForContainer(id)
		inv := newInventory(id, record, rerr, listing.Entries, listing.Corrupt, set, log)
		if err != nil {
			inv.listErr = err
			inv.failures = append(inv.failures, Outcome{ContainerID: id, Class: Failed, Err: err})
		}
		return inv
	}
	inv := &inventory{id: id, record: record, recordErr: rerr}
	for _, a := range requested {
		s := &slot{NetAttachment: a, rec: findLine(record, a.Name, a.Ifname)}
		// Without a readable entry the saved or loaded config DELs; libcni
		// must then not read a corrupt file (it may be a FIFO, or huge), so
		// its path is kept. Any other read error means there is no entry.
		e, err := m.cache.Get(a.Name, id, a.Ifname)
		var ee *cache.EntryError
		switch {
		case err == nil:
			s.entry = e
		case errors.Is(err, cache.ErrCorruptEntry) && errors.As(err, &ee):
			s.corrupt = ee
		}
		inv.slots = append(inv.slots, s)
	}
	return inv
}

// newInventory is [mergeInventory], then logs what the caller is about to
// act on: corrupt cache files acted on with a saved or loaded config, and
// interface names that several networks claim.
func newInventory(id string, record []cache.Attachment, rerr error, entries []*cache.Entry, corrupt []*cache.EntryError,
	set *networkSet, log *logrus.Entry,
) *inventory {
	inv := mergeInventory(id, record, rerr, entries, corrupt, set)
	for _, s := range inv.slots {
		if s.corrupt != nil {
			log.WithError(s.corrupt).WithFields(logrus.Fields{"file": filepath.Base(s.corrupt.Path), "network": s.Name}).
				Warn("Corrupt CNI cache entry; acting on it with the saved or loaded config")
		}
	}
	warnDuplicateIfnames(inv.slots, log)
	return inv
}

// mergeInventory merges what is on disk for sandbox id: its readable cache
// entries, its corrupt cache files, and its order record. This is the
// merge rule:
//   - every readable entry is an attachment;
//   - a corrupt file is one when its name names the attachment and there
//     is a config to delete it with (saved with the record, or loaded);
//     otherwise it is a failure, left for the next teardown or GC;
//   - every record line that neither names is an attachment: an ADD that
//     failed, or crashed, before libcni cached it, or an entry that was
//     removed by hand;
//   - every attachment carries its record line, if any.
//
// A request adds to it with [inventory.include].
func mergeInventory(id string, record []cache.Attachment, rerr error, entries []*cache.Entry, corrupt []*cache.EntryError,
	set *networkSet,
) *inventory {
	inv := &inventory{id: id, record: record, recordErr: rerr}
	for _, e := range entries {
		a := NetAttachment{Name: e.Network, Ifname: e.IfName}
		inv.slots = append(inv.slots, &slot{NetAttachment: a, entry: e, rec: findLine(record, a.Name, a.Ifname)})
	}
	for _, ee := range corrupt {
		a := NetAttachment{Name: ee.Network, Ifname: ee.IfName}
		rec := findLine(record, a.Name, a.Ifname)
		switch {
		case ee.Network == "":
			inv.failures = append(inv.failures, Outcome{ContainerID: id, Class: Failed, Err: ee})
		case set.Network(a.Name) == nil && (rec == nil || rec.Config == ""):
			inv.failures = append(inv.failures, Outcome{
				ContainerID: id, Network: a.Name, IfName: a.Ifname, Class: Failed,
				Err: fmt.Errorf("%w (no saved or loaded config to delete it with)", ee),
			})
		default:
			inv.slots = append(inv.slots, &slot{NetAttachment: a, corrupt: ee, rec: rec})
		}
	}
	for i := range record {
		a := &record[i]
		if !inv.names(a.Network, a.IfName) {
			inv.slots = append(inv.slots, &slot{NetAttachment: NetAttachment{Name: a.Network, Ifname: a.IfName}, rec: a})
		}
	}
	return inv
}

// include adds each of atts that the inventory does not name yet, as a
// slot with nothing on disk: attachments a request or a setup asks for,
// which may exist by the time a plugin runs.
func (inv *inventory) include(atts []NetAttachment) {
	for _, a := range atts {
		if !inv.names(a.Name, a.Ifname) {
			inv.slots = append(inv.slots, &slot{NetAttachment: a, rec: findLine(inv.record, a.Name, a.Ifname)})
		}
	}
}

// attachments returns every attachment the inventory names, each once:
// its slots, then the failures whose file names one. GC keeps them all
// for a sandbox that is valid, or being set up.
func (inv *inventory) attachments() []NetAttachment {
	out := make([]NetAttachment, 0, len(inv.slots)+len(inv.failures))
	for _, s := range inv.slots {
		out = append(out, s.NetAttachment)
	}
	for _, o := range inv.failures {
		if o.Network != "" && o.IfName != "" {
			out = append(out, NetAttachment{Name: o.Network, Ifname: o.IfName})
		}
	}
	return out
}

// recordAttachments returns the attachments of record lines.
func recordAttachments(record []cache.Attachment) []NetAttachment {
	out := make([]NetAttachment, len(record))
	for i, a := range record {
		out[i] = NetAttachment{Name: a.Network, Ifname: a.IfName}
	}
	return out
}

// names reports whether a slot or a failure names (network, ifname).
func (inv *inventory) names(network, ifname string) bool {
	return inv.find(network, ifname) != nil || slices.ContainsFunc(inv.failures, func(o Outcome) bool {
		return o.Network == network && o.IfName == ifname
	})
}

func (inv *inventory) find(network, ifname string) *slot {
	for _, s := range inv.slots {
		if s.Name == network && s.Ifname == ifname {
			return s
		}
	}
	return nil
}

// findLine returns the record's line for (network, ifname), or nil.
func findLine(record []cache.Attachment, network, ifname string) *cache.Attachment {
	for i := range record {
		if record[i].Network == network && record[i].IfName == ifname {
			return &record[i]
		}
	}
	return nil
}

// sortForTeardown orders attachments for DEL: those missing from the
// recorded ADD order first, by network then ifname descending, then the
// recorded ones in reverse ADD order.
func sortForTeardown(keys []NetAttachment, recorded []cache.Attachment) {
	slices.SortStableFunc(keys, teardownOrder(recorded))
}

func sortSlotsForTeardown(slots []*slot, recorded []cache.Attachment) {
	cmp := teardownOrder(recorded)
	slices.SortStableFunc(slots, func(a, b *slot) int { return cmp(a.NetAttachment, b.NetAttachment) })
}

func teardownOrder(recorded []cache.Attachment) func(a, b NetAttachment) int {
	pos := make(map[NetAttachment]int, len(recorded))
	for i, a := range recorded {
		pos[NetAttachment{Name: a.Network, Ifname: a.IfName}] = i
	}
	return func(a, b NetAttachment) int {
		pa, oka := pos[a]
		pb, okb := pos[b]
		switch {
		case oka && okb:
			return pb - pa
		case oka != okb:
			if oka {
				return 1
			}
			return -1
		}
		if c := strings.Compare(b.Name, a.Name); c != 0 {
			return c
		}
		return strings.Compare(b.Ifname, a.Ifname)
	}
}

func warnDuplicateIfnames(slots []*slot, log *logrus.Entry) {
	nets := map[string][]string{}
	for _, s := range slots {
		nets[s.Ifname] = append(nets[s.Ifname], s.Name)
	}
	for ifname, names := range nets {
		if len(names) > 1 {
			log.WithFields(logrus.Fields{"ifname": ifname, "networks": names}).
				Warn("Several networks claim the same interface name; deleting each of them")
		}
	}
}
