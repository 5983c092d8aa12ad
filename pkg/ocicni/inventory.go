package ocicni

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// sandboxStore is the engine's side of the ledger (internal/ledger, the one
// door to the cache dir), and it has two halves: this file merges what
// the ledger holds of a sandbox (its cache entries, order record and
// saved configs) into its inventory, and record.go alone computes and
// commits order records. It needs nothing of the manager but the
// ledger, the heal policy, and the healer's track for the retries a
// record leaves pending.
type sandboxStore struct {
	led   *ledger.Ledger
	heal  HealPolicy
	track func(id string, st healState, link trace.SpanContext) // the healer's
	// unsettled hands the healer the attachments whose DELs ran but whose
	// outcome could not be committed (see [sandboxStore.settle]).
	unsettled func(id string, atts []NetAttachment)
	fault     lockFault // whether the lock files can be used
}

// knownAttachment is one attachment of a sandbox, with everything known of it.
type knownAttachment struct {
	NetAttachment
	entry   *cache.Entry      // its readable cache entry, or nil
	corrupt *cache.EntryError // its corrupt cache file, or nil
	rec     *cache.Attachment // its line in the order record (saved config, netns, heal state), or nil
}

// inventory is what is known of one sandbox's attachments: the networks a
// request names, the libcni cache entries, and the order record with its
// saved configs and pending heals. It is the one answer to "which
// attachments does this sandbox have"; teardown, healing and GC act on it.
type inventory struct {
	id    string
	known []*knownAttachment // each (network, ifname) once
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

// cacheFiles returns a known attachment for each of the sandbox's cache files,
// readable or corrupt: its own, or, for a corrupt file that no DEL
// can act on, one of the attachment its name names ("" names when it
// names none) that the inventory does not hold.
func (inv *inventory) cacheFiles() []*knownAttachment {
	var out []*knownAttachment
	for _, s := range inv.known {
		if s.file() != "" {
			out = append(out, s)
		}
	}
	for _, o := range inv.failures {
		var ee *cache.EntryError
		if errors.As(o.Err, &ee) {
			out = append(out, &knownAttachment{NetAttachment: NetAttachment{Name: ee.Network, Ifname: ee.IfName}, corrupt: ee})
		}
	}
	return out
}

// takeInventory reads what is known of sandbox id's attachments. With
// requested attachments it holds exactly those, in the order given;
// otherwise every attachment that the cache or the order record knows of
// (see [sandboxStore.readInventory]), logged as [logInventory] says.
func (st *sandboxStore) takeInventory(id string, requested []NetAttachment, set *networkSet, log *logrus.Entry) *inventory {
	if len(requested) == 0 {
		inv := st.readInventory(id, set)
		logInventory(inv, log)
		return inv
	}
	names := make([][2]string, len(requested))
	for i, a := range requested {
		names[i] = [2]string{a.Name, a.Ifname}
	}
	// Without a readable entry the saved or loaded config DELs; libcni
	// must then not read a corrupt file (it may be a FIFO, or huge), so
	// its path is kept.
	sb, files := st.led.ReadNamed(id, names)
	inv := &inventory{id: id, record: sb.Record, recordErr: sb.RecordErr}
	for i, a := range requested {
		inv.known = append(inv.known, &knownAttachment{
			NetAttachment: a, rec: findLine(sb.Record, a.Name, a.Ifname), entry: files[i].Entry, corrupt: files[i].Corrupt,
		})
	}
	return inv
}

// readInventory reads what the cache files named for sandbox id
// ([cache.Cache.ForContainer]) and its order record know of it (see
// [mergeInventory]). A listing failure is in listErr, and a failure.
func (st *sandboxStore) readInventory(id string, set *networkSet) *inventory {
	sb := st.led.Read(id)
	inv := mergeInventory(id, sb.Record, sb.RecordErr, sb.Entries, sb.Corrupt, set)
	if sb.ListErr != nil {
		inv.listErr = sb.ListErr
		inv.failures = append(inv.failures, Outcome{ContainerID: id, Class: Failed, Err: sb.ListErr})
	}
	return inv
}

// logInventory logs what the caller of an inventory is about to act on:
// corrupt cache files acted on with a saved or loaded config, and
// interface names that several networks claim.
func logInventory(inv *inventory, log *logrus.Entry) {
	nets := map[string][]string{}
	for _, s := range inv.known {
		if s.corrupt != nil {
			log.WithError(s.corrupt).WithFields(logrus.Fields{"file": filepath.Base(s.corrupt.Path), "network": s.Name}).
				Warn("Corrupt CNI cache entry; acting on it with the saved or loaded config")
		}
		nets[s.Ifname] = append(nets[s.Ifname], s.Name)
	}
	for ifname, names := range nets {
		if len(names) > 1 {
			log.WithFields(logrus.Fields{"ifname": ifname, "networks": names}).
				Warn("Several networks claim the same interface name; deleting each of them")
		}
	}
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
		inv.known = append(inv.known, &knownAttachment{NetAttachment: a, entry: e, rec: findLine(record, a.Name, a.Ifname)})
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
			inv.known = append(inv.known, &knownAttachment{NetAttachment: a, corrupt: ee, rec: rec})
		}
	}
	for i := range record {
		a := &record[i]
		if !inv.names(a.Network, a.IfName) {
			inv.known = append(inv.known, &knownAttachment{NetAttachment: NetAttachment{Name: a.Network, Ifname: a.IfName}, rec: a})
		}
	}
	return inv
}

// include adds each of atts that the inventory does not name yet, as a
// known attachment with nothing on disk: attachments a request or a setup asks for,
// which may exist by the time a plugin runs.
func (inv *inventory) include(atts []NetAttachment) {
	for _, a := range atts {
		if !inv.names(a.Name, a.Ifname) {
			inv.known = append(inv.known, &knownAttachment{NetAttachment: a, rec: findLine(inv.record, a.Name, a.Ifname)})
		}
	}
}

// attachments returns every attachment the inventory names, each once:
// its known attachments, then the failures whose file names one. GC keeps them all
// for a sandbox that is valid, or being set up.
func (inv *inventory) attachments() []NetAttachment {
	out := make([]NetAttachment, 0, len(inv.known)+len(inv.failures))
	for _, s := range inv.known {
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

// knownFor returns the known attachment of att, or a new one with nothing on disk but
// its record line, if any. The new one is not added to the inventory.
func (inv *inventory) knownFor(att NetAttachment) *knownAttachment {
	if s := inv.find(att.Name, att.Ifname); s != nil {
		return s
	}
	return &knownAttachment{NetAttachment: att, rec: findLine(inv.record, att.Name, att.Ifname)}
}

// orDefault is the teardown's rule for a sandbox of which nothing is
// known at all: its ADD may have failed before anything was recorded, so
// the default network's eth0 (name; none when "") gets a DEL, which is
// harmless when there is nothing to delete.
func (inv *inventory) orDefault(name string) {
	if len(inv.known) == 0 && len(inv.failures) == 0 && name != "" {
		// Nothing known: no record line either, since each is an attachment.
		inv.known = append(inv.known, &knownAttachment{NetAttachment: NetAttachment{Name: name, Ifname: DefaultInterfaceName}})
	}
}

// due returns the attachments whose background DEL retry is due at now
// (see [HealPolicy]), in reverse ADD order, each as the inventory knows
// it: libcni reads a cache entry for them only if the inventory accepted
// it, as for every other DEL.
func (inv *inventory) due(now time.Time) []*knownAttachment {
	var out []*knownAttachment
	for i := len(inv.record) - 1; i >= 0; i-- {
		a := inv.record[i]
		if h := a.Heal; h != nil && !h.GaveUp && !now.Before(h.Next) {
			out = append(out, inv.knownFor(NetAttachment{Name: a.Network, Ifname: a.IfName}))
		}
	}
	return out
}

// forStatus returns the attachments a status without requested networks
// reports: those recorded at ADD, in ADD order; else the readable cache
// entries (a pod set up by another library). None means the default
// network (see [inventory.slotFor]).
func (inv *inventory) forStatus() []*knownAttachment {
	if inv.recordErr == nil && len(inv.record) > 0 {
		out := make([]*knownAttachment, 0, len(inv.record))
		for _, a := range inv.record {
			out = append(out, inv.knownFor(NetAttachment{Name: a.Network, Ifname: a.IfName}))
		}
		return out
	}
	var out []*knownAttachment
	for _, s := range inv.known {
		if s.entry != nil {
			out = append(out, s)
		}
	}
	return out
}

// setupInventory is what GC keeps of sandbox id, whose setup overlapped
// it: the inventory as it is now (the cache entries planning saw, the
// order record read again), with what planning read of the record
// (planned) and what the setup asked for. An unreadable record leaves
// the other two.
func (st *sandboxStore) setupInventory(id string, entries []*cache.Entry, planned []cache.Attachment, asked []NetAttachment,
	set *networkSet,
) *inventory {
	recorded, err := st.led.ReadRecord(id)
	inv := mergeInventory(id, recorded, err, entries, nil, set)
	inv.include(recordAttachments(planned))
	inv.include(asked)
	return inv
}

// hasCacheFiles reports whether any cache file of sandbox id is left,
// readable or corrupt.
func (st *sandboxStore) hasCacheFiles(id string) (bool, error) {
	return st.led.HasFiles(id)
}

// names reports whether a known attachment or a failure names (network, ifname).
func (inv *inventory) names(network, ifname string) bool {
	return inv.find(network, ifname) != nil || slices.ContainsFunc(inv.failures, func(o Outcome) bool {
		return o.Network == network && o.IfName == ifname
	})
}

func (inv *inventory) find(network, ifname string) *knownAttachment {
	for _, s := range inv.known {
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

// assignIfnames returns the attachments to make: the requested ones, or
// the default network alone. Requested interface names are kept; the others
// get eth0, eth1, ... skipping names already taken. A duplicate requested
// name is an error.
func assignIfnames(requested []NetAttachment, defaultNet string) ([]NetAttachment, error) {
	atts := make([]NetAttachment, 0, max(len(requested), 1))
	if len(requested) == 0 {
		if defaultNet == "" {
			return nil, ErrNoDefaultNetwork
		}
		atts = append(atts, NetAttachment{Name: defaultNet})
	} else {
		atts = append(atts, requested...)
	}
	taken := make(map[string]bool, len(atts))
	for _, a := range atts {
		if err := checkNetworkName(a.Name); err != nil {
			return nil, err
		}
		if a.Ifname == "" {
			continue
		}
		if err := checkIfname(a.Ifname); err != nil {
			return nil, err
		}
		if taken[a.Ifname] {
			return nil, &InvalidArgumentError{
				Field: "interface name", Value: a.Ifname,
				Reason: fmt.Sprintf("requested twice (network %q)", a.Name),
			}
		}
		taken[a.Ifname] = true
	}
	next := 0
	for i := range atts {
		if atts[i].Ifname != "" {
			continue
		}
		for taken[fmt.Sprintf("eth%d", next)] {
			next++
		}
		atts[i].Ifname = fmt.Sprintf("eth%d", next)
		taken[atts[i].Ifname] = true
	}
	return atts, nil
}

// sortForTeardown orders known attachments for DEL: those missing from the
// recorded ADD order first, by network then ifname descending, then the
// recorded ones in reverse ADD order.
func sortForTeardown(slots []*knownAttachment, recorded []cache.Attachment) {
	pos := make(map[NetAttachment]int, len(recorded))
	for i, a := range recorded {
		pos[NetAttachment{Name: a.Network, Ifname: a.IfName}] = i
	}
	slices.SortStableFunc(slots, func(x, y *knownAttachment) int {
		a, b := x.NetAttachment, y.NetAttachment
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
	})
}
