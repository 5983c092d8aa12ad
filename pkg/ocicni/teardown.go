package ocicni

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// TearDownPod detaches the pod. See [Manager.TearDownPodWithContext].
func (m *Manager) TearDownPod(pod PodNetwork) error {
	return m.TearDownPodWithContext(context.Background(), pod)
}

// TearDownPodWithContext runs DEL for every attachment of the pod, best
// effort: a failure never stops the DELs that follow. With pod.Networks
// empty, the attachments come from the libcni cache; otherwise exactly the
// named ones are deleted. Under the strict policy it returns a
// *[TeardownError] naming every failure; under the tolerant policy it logs
// them and returns nil. See the package documentation, "Teardown semantics".
func (m *Manager) TearDownPodWithContext(ctx context.Context, pod PodNetwork) error {
	_, err := m.TearDownPodOutcomes(ctx, pod)
	return err
}

// TearDownPodOutcomes is [Manager.TearDownPodWithContext] that also returns
// the outcome of every attachment, in the order the DELs ran, whatever the
// policy.
func (m *Manager) TearDownPodOutcomes(ctx context.Context, pod PodNetwork) ([]Outcome, error) {
	release, log, err := m.beginPodOp(ctx, &pod)
	if err != nil {
		return nil, err
	}
	defer release()

	plans, outcomes, err := m.teardownPlans(&pod, log)
	if err != nil {
		return nil, err
	}
	outcomes = append(outcomes, m.deleteAll(ctx, plans, log, "teardown")...)
	return outcomes, m.teardownResult(&pod, outcomes, log)
}

// teardownPlans finds the attachments to delete. Requested networks are
// used as given; otherwise the cache entries of the container, ordered by
// the recorded ADD order reversed. Attachments that cannot be planned
// (corrupt entry and no loaded config) come back as outcomes.
func (m *Manager) teardownPlans(pod *PodNetwork, log *logrus.Entry) ([]*plan, []Outcome, error) {
	set := m.snapshot()
	if len(pod.Networks) > 0 {
		atts, err := assignIfnames(pod.Networks, "")
		if err != nil {
			return nil, nil, err
		}
		plans := make([]*plan, 0, len(atts))
		for i := len(atts) - 1; i >= 0; i-- {
			entry, err := m.cache.Get(atts[i].Name, pod.ID, atts[i].Ifname)
			if err != nil {
				entry = nil
			}
			p, err := m.planFor(pod, atts[i], entry, set)
			if err != nil {
				return nil, nil, err
			}
			plans = append(plans, p)
		}
		return plans, nil, nil
	}

	entries, lerr := m.cache.ForContainer(pod.ID)
	var outcomes []Outcome
	byKey := map[NetAttachment]*cache.Entry{}
	var keys []NetAttachment
	corrupt := map[NetAttachment]string{}
	for _, e := range entries {
		k := NetAttachment{Name: e.Network, Ifname: e.IfName}
		if _, dup := byKey[k]; dup {
			continue
		}
		byKey[k] = e
		keys = append(keys, k)
	}
	for _, err := range flatten(lerr) {
		var ee *cache.EntryError
		if !errors.As(err, &ee) || ee.Network == "" || ee.IfName == "" {
			log.WithError(err).Error("Cannot read CNI cache")
			outcomes = append(outcomes, Outcome{Class: Failed, Err: err})
			continue
		}
		k := NetAttachment{Name: ee.Network, Ifname: ee.IfName}
		if _, ok := byKey[k]; ok || set.byName[k.Name] == nil {
			log.WithError(err).Error("Corrupt CNI cache entry and no loaded config to delete with")
			outcomes = append(outcomes, Outcome{Network: k.Name, IfName: k.Ifname, Class: Failed, Err: err})
			continue
		}
		log.WithError(err).Warn("Corrupt CNI cache entry; deleting with the loaded config")
		corrupt[k] = ee.Path
		keys = append(keys, k)
	}
	warnDuplicateIfnames(keys, log)

	recorded, oerr := m.cache.ReadOrder(pod.ID)
	if oerr != nil {
		log.WithError(oerr).Warn("Cannot read attachment order; using the fallback order")
	}
	if pod.NetNS == "" && len(recorded) > 0 {
		pod.NetNS = recorded[0].NetNS // for attachments that were never cached
	}
	for _, a := range recorded {
		k := NetAttachment{Name: a.Network, Ifname: a.IfName}
		if !slices.Contains(keys, k) {
			keys = append(keys, k) // an ADD that failed before libcni cached it
		}
	}
	if len(keys) == 0 && set.defaultName != "" {
		// Nothing cached: the ADD may have failed before caching. DEL on
		// the default network is harmless when there is nothing to delete.
		keys = append(keys, NetAttachment{Name: set.defaultName, Ifname: DefaultInterfaceName})
	}
	sortForTeardown(keys, recorded)

	plans := make([]*plan, 0, len(keys))
	for _, k := range keys {
		p, err := m.planFor(pod, k, byKey[k], set)
		if err != nil {
			return nil, nil, err
		}
		p.corrupt = corrupt[k]
		plans = append(plans, p)
	}
	return plans, outcomes, nil
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

// planFor builds the DEL plan of one attachment: the cached config and
// runtime args when there is a cache entry, else the loaded config.
func (m *Manager) planFor(pod *PodNetwork, att NetAttachment, entry *cache.Entry, set *networkSet) (*plan, error) {
	p := &plan{NetAttachment: att}
	if entry != nil {
		list, err := listFromCache(entry.Config)
		if err == nil {
			p.list = list
			p.policy, _ = policyFromBytes(entry.Config)
			p.rt = &libcni.RuntimeConf{
				ContainerID:    pod.ID,
				NetNS:          pod.NetNS,
				IfName:         att.Ifname,
				Args:           entry.CNIArgs,
				CapabilityArgs: entry.CapabilityArgs,
			}
			if p.rt.NetNS == "" {
				p.rt.NetNS = entry.NetNS
			}
			return p, nil
		}
		m.log.WithFields(logrus.Fields{"network": att.Name, "file": entry.Path}).WithError(err).
			Warn("Cached config unusable; falling back to the loaded config")
	}
	if n := set.byName[att.Name]; n != nil {
		rt, err := buildRuntimeConf(pod, att)
		if err != nil {
			return nil, err
		}
		p.list, p.rt, p.policy = n.list, rt, n.policy
	}
	return p, nil
}

// listFromCache parses the config bytes stored in a cache entry: a config
// list, or a single plugin config as older libcni users stored.
func listFromCache(b []byte) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(b)
	if err == nil && len(list.Plugins) > 0 {
		return list, nil
	}
	conf, cerr := libcni.ConfFromBytes(b) //nolint:staticcheck // older libcni users cached plain configs
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return pluginConfToList(conf)
}

// deleteAll runs DEL for every plan in the given order and never stops
// early. Attachments whose plugin reports the container unknown count as
// deleted, and their cache entries are removed.
func (m *Manager) deleteAll(ctx context.Context, plans []*plan, log *logrus.Entry, why string) []Outcome {
	outcomes := make([]Outcome, 0, len(plans))
	for _, p := range plans {
		plog := planLog(log, p, "DEL").WithField("reason", why)
		o := Outcome{Network: p.Name, IfName: p.Ifname}
		if p.list == nil {
			o.Class, o.Err = NoConfig, ErrNoConfig
			plog.Warn("No config and no cache entry for attachment; nothing to run DEL with")
			outcomes = append(outcomes, o)
			continue
		}
		err := m.cni.DelNetworkList(ctx, p.list, p.rt)
		o.Class, o.Err = classify(err), err
		switch {
		case o.Class == AlreadyGone:
			if rerr := m.cache.Remove(p.Name, p.rt.ContainerID, p.Ifname); rerr != nil {
				plog.WithError(rerr).Warn("Cannot remove cache entry")
			}
		case o.Class == Deleted && p.corrupt != "":
			if rerr := m.cache.RemoveFile(p.corrupt); rerr != nil {
				plog.WithError(rerr).Warn("Cannot remove corrupt cache entry")
			}
		}
		o.Policy = p.policy
		if o.Failure() || o.Class == AlreadyGone {
			plog.WithError(err).WithField("outcome", o.Class.String()).Warn("CNI DEL did not succeed")
		} else {
			plog.Debug("Deleted pod from CNI network")
		}
		outcomes = append(outcomes, o)
	}
	return outcomes
}

// teardownResult applies the policy: strict failures become a
// *TeardownError; tolerated ones are logged. The attachment order record
// is removed once nothing is left.
func (m *Manager) teardownResult(pod *PodNetwork, outcomes []Outcome, log *logrus.Entry) error {
	strict, left := false, false
	for i := range outcomes {
		o := &outcomes[i]
		if o.Policy == "" {
			o.Policy = m.opts.policy
		}
		if o.Failure() {
			left = true
			o.Tolerated = o.Policy == Tolerant
			if !o.Tolerated {
				strict = true
			} else {
				log.WithFields(logrus.Fields{"network": o.Network, "ifname": o.IfName, "verb": "DEL",
					"outcome": o.Class.String()}).WithError(o.Err).
					Error("Tolerating CNI DEL failure; its cache entry is kept for retry and GC")
			}
		}
	}
	if !left {
		if err := m.cache.RemoveOrder(pod.ID); err != nil {
			log.WithError(err).Warn("Cannot remove attachment order record")
		}
	}
	if strict {
		return &TeardownError{ContainerID: pod.ID, Outcomes: outcomes}
	}
	return nil
}

// flatten splits a joined error into its parts.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
