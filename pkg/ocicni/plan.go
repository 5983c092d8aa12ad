package ocicni

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// plan is one attachment to act on: the network list and the runtime
// configuration to run it with.
type plan struct {
	NetAttachment
	id     string                    // container ID
	list   *libcni.NetworkConfigList // nil: neither loaded nor cached
	rt     *libcni.RuntimeConf
	policy TeardownPolicy
	// entryPath is a cache file that libcni must not read: a corrupt
	// entry, or one whose result libcni cannot decode (its DEL would drop
	// the file before running any plugin, or panic). DEL then runs with
	// libcni pointed at an empty cache dir, and the file is removed only
	// once DEL succeeded.
	entryPath string
	// known is set when a cache entry or the order record names the
	// attachment, so it may exist: having no config to DEL it with is
	// then a failure ([Orphaned]), not a warning.
	known bool
}

// planFor builds the DEL or CHECK plan of one attachment of container id:
// the cached config and runtime args when entry holds usable ones, else
// the loaded config. netns is the caller's netns path, which wins over the
// one stored in entry; stored paths are used only if they pass
// [storedNetNS]. It never modifies pod.
func (m *Manager) planFor(pod *PodNetwork, netns string, att NetAttachment, entry *cache.Entry,
	set *networkSet, log *logrus.Entry,
) (*plan, error) {
	p := &plan{NetAttachment: att, id: pod.ID, known: entry != nil}
	plog := func() *logrus.Entry { // built only to warn
		return log.WithFields(logrus.Fields{"network": att.Name, "ifname": att.Ifname})
	}
	if entry != nil {
		list, policy, err := cachedList(entry.Config, att.Name, set)
		if err == nil {
			if netns == "" {
				if netns, err = storedNetNS(entry.NetNS); err != nil {
					plog().WithError(err).Warn("Ignoring the netns path of a cache entry")
				}
			}
			p.list, p.policy = list, policy
			p.rt = &libcni.RuntimeConf{
				ContainerID:    pod.ID,
				NetNS:          netns,
				IfName:         att.Ifname,
				Args:           entry.CNIArgs,
				CapabilityArgs: entry.CapabilityArgs,
			}
		} else {
			plog().WithField("file", entry.Path).WithError(err).
				Warn("Cached config unusable; falling back to the loaded config")
		}
	}
	if p.list == nil {
		n := set.byName[att.Name]
		if n == nil {
			return p, nil
		}
		q := *pod
		q.NetNS = netns
		rt, err := buildRuntimeConf(&q, att)
		if err != nil {
			return nil, err
		}
		p.list, p.rt, p.policy = n.list, rt, n.policy
	}
	if entry != nil {
		if err := entry.CheckLibcniResult(p.list.CNIVersion); err != nil {
			plog().WithError(err).Warn("libcni cannot use the cached result; running DEL without it and keeping the entry until DEL succeeds")
			p.entryPath = entry.Path
		}
	}
	return p, nil
}

// cachedList returns the config list and teardown policy stored in a
// cache entry of network name. When the entry holds the very bytes of the
// loaded config, as it does unless the file changed since the ADD, the
// loaded list is used and nothing is parsed again.
func cachedList(b []byte, name string, set *networkSet) (*libcni.NetworkConfigList, TeardownPolicy, error) {
	if n := set.byName[name]; n != nil && bytes.Equal(n.list.Bytes, b) {
		return n.list, n.policy, nil
	}
	list, err := listFromCache(b, name)
	if err != nil {
		return nil, "", err
	}
	policy, _ := policyFromBytes(b) // a bad key in a cached config means the default
	return list, policy, nil
}

// listFromCache parses the config bytes stored in a cache entry of network
// name: a config list, or a single plugin config as older libcni users
// stored. The config must name the same network (libcni derives the cache
// path from it) and only plugin types that cannot leave the bin dirs.
func listFromCache(b []byte, name string) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil || len(list.Plugins) == 0 {
		conf, cerr := libcni.ConfFromBytes(b) //nolint:staticcheck // older libcni users cached plain configs
		if cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		if list, err = pluginConfToList(conf); err != nil {
			return nil, err
		}
	}
	if list.Name != name {
		return nil, fmt.Errorf("%w: cached config is network %q, the entry is %q", ErrInvalidConfig, list.Name, name)
	}
	for i, p := range list.Plugins {
		if err := validPluginType(p.Network.Type); err != nil {
			return nil, fmt.Errorf("%w: plugin %d: %w", ErrInvalidConfig, i, err)
		}
	}
	return list, nil
}

// found is what teardown planning learnt of a pod's attachments: which to
// delete, in order, with their cache entries and corrupt cache files, and
// outcomes for those that cannot be planned.
type found struct {
	keys     []NetAttachment
	entries  map[NetAttachment]*cache.Entry
	corrupt  map[NetAttachment]string // path of a corrupt entry
	outcomes []Outcome
}

// teardownPlans finds the attachments to delete, in the order to delete
// them: the requested networks in reverse request order, or, with none
// requested, every attachment the cache or the order record knows of (see
// [Manager.collectCached]) in reverse ADD order. Attachments that cannot
// be planned come back as outcomes.
func (m *Manager) teardownPlans(pod *PodNetwork, recorded []cache.Attachment, log *logrus.Entry) ([]*plan, []Outcome, error) {
	set := m.snapshot()
	netns := pod.NetNS
	if netns == "" && len(recorded) > 0 {
		netns = m.recordedNetNS(recorded[0], log) // for attachments that were never cached
	}
	var f found
	if len(pod.Networks) > 0 {
		atts, err := assignIfnames(pod.Networks, "")
		if err != nil {
			return nil, nil, err
		}
		f = m.collectRequested(pod.ID, atts)
	} else {
		f = m.collectCached(pod.ID, set, log)
		f.keys = mergeRecorded(f.keys, recorded, f.outcomes)
		if len(f.keys) == 0 && len(f.outcomes) == 0 && set.defaultName != "" {
			// Nothing cached: the ADD may have failed before caching. DEL on
			// the default network is harmless when there is nothing to delete.
			f.keys = append(f.keys, NetAttachment{Name: set.defaultName, Ifname: DefaultInterfaceName})
		}
		sortForTeardown(f.keys, recorded)
	}

	plans := make([]*plan, 0, len(f.keys))
	for _, k := range f.keys {
		p, err := m.planFor(pod, netns, k, f.entries[k], set, log)
		if err != nil {
			return nil, nil, err
		}
		if path := f.corrupt[k]; path != "" {
			p.entryPath, p.known = path, true
		}
		p.known = p.known || slices.ContainsFunc(recorded, func(a cache.Attachment) bool {
			return a.Network == k.Name && a.IfName == k.Ifname
		})
		plans = append(plans, p)
	}
	return plans, f.outcomes, nil
}

// collectRequested returns the requested attachments in reverse request
// order, with their cache entries. Without a readable entry the loaded
// config DELs; libcni must then not read a corrupt file (it may be a
// FIFO, or huge), so its path is kept. Any other read error means there is
// no entry.
func (m *Manager) collectRequested(id string, atts []NetAttachment) found {
	f := found{entries: make(map[NetAttachment]*cache.Entry, len(atts)), corrupt: map[NetAttachment]string{}}
	for i := len(atts) - 1; i >= 0; i-- {
		f.keys = append(f.keys, atts[i])
		e, err := m.cache.Get(atts[i].Name, id, atts[i].Ifname)
		var ee *cache.EntryError
		switch {
		case err == nil:
			f.entries[atts[i]] = e
		case errors.Is(err, cache.ErrCorruptEntry) && errors.As(err, &ee):
			f.corrupt[atts[i]] = ee.Path
		}
	}
	return f
}

// collectCached returns the attachments of container id that the cache
// holds: the readable entries, and the corrupt ones whose file name names
// the attachment and whose network has a loaded config to DEL with. Other
// corrupt entries, and a cache that cannot be listed, come back as Failed
// outcomes: nothing can be run for them, and they stay for the next
// teardown or GC.
func (m *Manager) collectCached(id string, set *networkSet, log *logrus.Entry) found {
	var f found
	listing, err := m.cache.ForContainer(id)
	if err != nil {
		f.outcomes = append(f.outcomes, Outcome{ContainerID: id, Class: Failed, Err: err})
	}
	f.entries = make(map[NetAttachment]*cache.Entry, len(listing.Entries))
	f.corrupt = map[NetAttachment]string{}
	for _, e := range listing.Entries {
		k := NetAttachment{Name: e.Network, Ifname: e.IfName}
		f.keys = append(f.keys, k) // one file per (network, ifname): no duplicates
		f.entries[k] = e
	}
	for _, ee := range listing.Corrupt {
		k := NetAttachment{Name: ee.Network, Ifname: ee.IfName}
		switch {
		case ee.Network == "":
			f.outcomes = append(f.outcomes, Outcome{ContainerID: id, Class: Failed, Err: ee})
		case set.byName[k.Name] == nil:
			f.outcomes = append(f.outcomes, Outcome{
				ContainerID: id, Network: k.Name, IfName: k.Ifname, Class: Failed,
				Err: fmt.Errorf("%w (no loaded config to delete it with)", ee),
			})
		default:
			log.WithError(ee).WithField("file", filepath.Base(ee.Path)).
				Warn("Corrupt CNI cache entry; deleting with the loaded config")
			f.corrupt[k] = ee.Path
			f.keys = append(f.keys, k)
		}
	}
	warnDuplicateIfnames(f.keys, log)
	return f
}

// mergeRecorded adds the recorded attachments that neither keys nor the
// already reported outcomes hold: ADDs that failed, or crashed, before
// libcni cached them.
func mergeRecorded(keys []NetAttachment, recorded []cache.Attachment, reported []Outcome) []NetAttachment {
	for _, a := range recorded {
		k := NetAttachment{Name: a.Network, Ifname: a.IfName}
		if !slices.Contains(keys, k) && !slices.ContainsFunc(reported, func(o Outcome) bool {
			return o.Network == a.Network && o.IfName == a.IfName
		}) {
			keys = append(keys, k)
		}
	}
	return keys
}

// recordedNetNS returns the netns path an order record holds for an
// attachment when a plugin may run in it (see [storedNetNS]).
func (m *Manager) recordedNetNS(a cache.Attachment, log *logrus.Entry) string {
	netns, err := storedNetNS(a.NetNS)
	if err != nil {
		log.WithError(err).Warn("Ignoring the netns path of an attachment order record")
	}
	return netns
}

// sortForTeardown orders attachments for DEL: those missing from the
// recorded ADD order first, by network then ifname descending, then the
// recorded ones in reverse ADD order.
func sortForTeardown(keys []NetAttachment, recorded []cache.Attachment) {
	pos := make(map[NetAttachment]int, len(recorded))
	for i, a := range recorded {
		pos[NetAttachment{Name: a.Network, Ifname: a.IfName}] = i
	}
	slices.SortStableFunc(keys, func(a, b NetAttachment) int {
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

func warnDuplicateIfnames(keys []NetAttachment, log *logrus.Entry) {
	nets := map[string][]string{}
	for _, k := range keys {
		nets[k.Ifname] = append(nets[k.Ifname], k.Name)
	}
	for ifname, names := range nets {
		if len(names) > 1 {
			log.WithFields(logrus.Fields{"ifname": ifname, "networks": names}).
				Warn("Several networks claim the same interface name; deleting each of them")
		}
	}
}
