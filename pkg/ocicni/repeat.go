package ocicni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file is setup's rule for attachments the sandbox already holds
// (see the package doc, "Repeated setups"). The CNI spec forbids a second
// ADD of one (network, container, ifname) without a DEL between them, and
// the rollback of such an ADD, which fails with plugins like bridge
// ("eth0 already exists"), would delete what an earlier setup returned.
// So a setup never runs ADD for a live attachment, and a rollback never
// deletes one: an identical request gets the cached result, a different
// one is refused before anything runs.

// live reports whether the slot's attachment is live: its ADD succeeded
// and no DEL was asked for since. libcni writes the cache entry only once
// ADD succeeded, and removes it (as the engine does) only once DEL
// succeeded; a DEL that failed leaves the entry but marks the record line
// with its retry state. A line written before an ADD that then failed or
// crashed has no entry. A corrupt entry proves nothing and is not live.
func (s *slot) live() bool {
	return s.entry != nil && (s.rec == nil || s.rec.Heal == nil)
}

// held is what a setup's sandbox holds when the setup starts, as its
// inventory read it under the sandbox's lock (see [Manager.reuseLive]).
type held struct {
	// reused[i] is the cached result of plans[i], converted to its
	// config's version, when the sandbox holds it live and identical to
	// the plan: no ADD runs for it. It is nil when plans[i] must be added.
	reused []types.Result
	// record is the sandbox's order record, which the setup's record
	// replaces; nil when there is none or it is unreadable.
	record []cache.Attachment
}

// reuseLive reads, under the sandbox's lock and before anything runs,
// what the sandbox holds: which of a setup's plans it holds live, and its
// record (see [held]). A live attachment that differs from its plan (see
// [liveDiff]), or whose cached result cannot be read, refuses the setup
// with an *[AttachedError].
func (a *attacher) reuseLive(pod *PodNetwork, plans []*plan, set *networkSet, log *logrus.Entry) (held, error) {
	atts := make([]NetAttachment, len(plans))
	for i, p := range plans {
		atts[i] = p.NetAttachment
	}
	inv := a.store.takeInventory(pod.ID, atts, set, log)
	reused := make([]types.Result, len(plans))
	for i, p := range plans {
		s := inv.slotFor(p.NetAttachment)
		if !s.live() {
			continue
		}
		refuse := func(reason string, err error) error {
			return &AttachedError{ContainerID: pod.ID, Network: p.Name, IfName: p.Ifname, Reason: reason, Err: err}
		}
		if reason := liveDiff(s, p); reason != "" {
			return held{}, refuse(reason, nil)
		}
		res, err := s.entry.ResultAt(p.list.CNIVersion)
		switch {
		case err != nil:
			return held{}, refuse("its cached result cannot be read", err)
		case res == nil:
			return held{}, refuse("its cache entry holds no result", nil)
		}
		reused[i] = res
	}
	h := held{reused: reused}
	if inv.recordErr == nil { // an unreadable record is replaced
		h.record = inv.record
	}
	return h, nil
}

// liveDiff returns what differs between the live attachment s and the
// plan p of the same network and ifname, or "" when they are identical:
// the very config bytes (libcni caches the list's bytes at ADD, and the
// record saves their digest), the netns, and the runtime arguments
// (CNI_ARGS and runtime-config capabilities) the ADD ran with.
func liveDiff(s *slot, p *plan) string {
	e := s.entry
	if !bytes.Equal(e.Config, p.list.Bytes) ||
		s.rec != nil && s.rec.Config != "" && s.rec.Config != ledger.ConfigDigest(p.list.Bytes) {
		return "its config differs from the loaded one"
	}
	netns := e.NetNS
	if netns == "" {
		netns = recNetNS(s.rec)
	}
	switch {
	case netns == "":
		return "its netns is not known"
	case netns != p.rt.NetNS || s.rec != nil && s.rec.NetNS != "" && s.rec.NetNS != p.rt.NetNS:
		return fmt.Sprintf("lives in netns %s", netns)
	case !slices.Equal(e.CNIArgs, p.rt.Args):
		return "its CNI_ARGS differ"
	case !sameCapabilities(e.CapabilityArgs, p.rt.CapabilityArgs):
		return "its runtime config differs"
	}
	return ""
}

// sameCapabilities reports whether the runtime-config capabilities a
// cache entry holds (decoded from JSON) are those of want, compared as
// libcni stores them: encoded to JSON and decoded again.
func sameCapabilities(cached, want map[string]any) bool {
	if len(cached) == 0 || len(want) == 0 {
		return len(cached) == len(want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var decoded map[string]any
	if err := json.Unmarshal(b, &decoded); err != nil {
		return false
	}
	return reflect.DeepEqual(cached, decoded)
}
