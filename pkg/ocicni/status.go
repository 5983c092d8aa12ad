package ocicni

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/telemetry"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// checker answers CHECK and STATUS (status.go).
type checker struct {
	*engine
	opts statusOptions
}

// statusOptions are the options a status check reads.
type statusOptions struct {
	netns NetNSOps // checks lo
}

// podStatus is [Manager.GetPodNetworkStatusWithContext]: see there.
func (ck *checker) podStatus(ctx context.Context, pod PodNetwork) (_ []NetResult, err error) {
	ctx, span := ck.startOp(ctx, opPodStatus, &pod)
	defer func() { span.End(ctx, telemetry.OutcomeOf(err), err) }()
	if _, err := usableStoredNetNS(pod.NetNS); err != nil {
		return nil, err
	}
	ctx, release, log, err := ck.beginPodOp(ctx, &pod)
	if err != nil {
		return nil, err
	}
	defer release()

	if err := ck.opts.netns.LoopbackCheck(ctx, pod.NetNS); err != nil {
		return nil, fmt.Errorf("ocicni: checking lo in %s: %w", pod.NetNS, err)
	}
	set := ck.snapshot()
	slots, err := ck.statusAttachments(&pod, set, log)
	if err != nil {
		return nil, err
	}
	results := make([]NetResult, 0, len(slots))
	for _, s := range slots {
		// Without a readable entry (none, or a corrupt one) status uses
		// the saved or loaded config and reads the interface from the
		// netns, which is what a cached result would have said; the
		// teardown and GC report corrupt entries.
		p, err := ck.planFor(&pod, pod.NetNS, s, set, log)
		if err != nil {
			return nil, err
		}
		if p.list == nil {
			return nil, set.NotFound(s.Name)
		}
		if debugEnabled(log) {
			planLog(log, p, "CHECK").Debug("Checking pod network")
		}
		res, err := ck.checkOne(ctx, &pod, p, s.entry, log)
		if err != nil {
			return nil, &NetworkError{Network: p.Name, IfName: p.Ifname, Verb: "CHECK", Err: err}
		}
		results = append(results, NetResult{Result: res, NetAttachment: s.NetAttachment})
	}
	return results, nil
}

// statusAttachments picks the attachments to report from the pod's inventory:
// the requested ones; else those of [inventory.forStatus]; else the
// default network.
func (ck *checker) statusAttachments(pod *PodNetwork, set *networkSet, log *logrus.Entry) ([]*knownAttachment, error) {
	var requested []NetAttachment
	if len(pod.Networks) > 0 {
		atts, err := assignIfnames(pod.Networks, "")
		if err != nil {
			return nil, err
		}
		requested = atts
	}
	inv := ck.store.takeInventory(pod.ID, requested, set, log)
	if requested != nil {
		return inv.known, nil
	}
	// A listing failure, like a corrupt entry, leaves the default network:
	// status then reports what the netns holds.
	if slots := inv.forStatus(); len(slots) > 0 {
		return slots, nil
	}
	atts, err := assignIfnames(nil, set.DefaultName())
	if err != nil {
		return nil, ck.explainDefault(err, set)
	}
	return []*knownAttachment{inv.knownFor(atts[0])}, nil
}

// checkOne returns the attachment's cached result, after CHECK where the
// version supports it. The cache entry read once by the caller serves as
// the result; libcni reads it again only for CHECK's prevResult. Without a
// readable cached result there is nothing to CHECK against, so it reads the
// interface from the netns. A cached result that cannot be converted to the
// config's version is returned as stored, without CHECK, and the conversion
// error is logged.
func (ck *checker) checkOne(ctx context.Context, pod *PodNetwork, p *plan, entry *cache.Entry, log *logrus.Entry) (types.Result, error) {
	var cached types.Result
	if entry != nil {
		r, err := entry.Result()
		if err != nil {
			planLog(log, p, "CHECK").WithError(err).Warn("Cached result unreadable; reading the netns")
		}
		cached = r
	}
	if cached != nil {
		if p.list.CNIVersion == "" {
			return cached, nil
		}
		res, err := ledger.ConvertResult(cached, p.list.CNIVersion) // decoded once, above
		if err != nil {
			planLog(log, p, "CHECK").WithError(err).
				Warn("Cached result cannot be converted to the config version; returning it as stored, without CHECK")
			return cached, nil
		}
		if p.cacheEntry == "" {
			// libcni's CHECK would fail on (or panic over) this cached
			// result; planFor logged why.
			return res, nil
		}
		if ck.fresh.fresh(pod.ID, p) {
			if debugEnabled(log) {
				planLog(log, p, "CHECK").Debug("Added a moment ago with this config; answering from the ADD's result")
			}
			return res, nil
		}
		if ok, _ := version.GreaterThanOrEqualTo(p.list.CNIVersion, "0.4.0"); ok {
			cctx, cancel := planRun(ctx, p, "CHECK", reasonStatus)
			err := ck.cni.check(cctx, p.list, p.rt, p.cacheEntry)
			cancel()
			if err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	mac, addrs, err := ck.opts.netns.InterfaceAddrs(ctx, pod.NetNS, p.Ifname)
	if err != nil {
		return nil, err
	}
	r := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{{Name: p.Ifname, Mac: mac.String(), Sandbox: pod.NetNS}},
	}
	for _, a := range addrs {
		r.IPs = append(r.IPs, &types100.IPConfig{Interface: types100.Int(0), Address: *a})
	}
	if p.list.CNIVersion == "" {
		return r, nil
	}
	return r.GetAsVersion(p.list.CNIVersion)
}

// status is [Manager.StatusWithContext]: see there.
func (ck *checker) status(ctx context.Context) (err error) {
	ctx, span := ck.startOp(ctx, opStatus, nil)
	defer func() { span.End(ctx, telemetry.OutcomeOf(err), err) }()
	set := ck.snapshot()
	n := set.Default()
	if n == nil {
		return ck.noDefaultError(set)
	}
	if err := ck.cni.status(ctx, n.List); err != nil {
		return &NetworkError{Network: n.Name, Verb: "STATUS", Err: err}
	}
	return nil
}

// NetworkStatus is the STATUS outcome of one loaded network.
//
// [Manager.GetPodNetworkStatusWithContext] returns the cached result, after
// CHECK for networks at CNI 0.4.0 or later (unless disableCheck); without a
// cached result it reads the interface's addresses from the netns through
// netlink. A CHECK failure is a [NetworkError] naming the network. Right
// after this manager's ADD it answers from the ADD's result instead
// ([WithStatusAlwaysChecks]).
//
// [Manager.StatusWithContext] fails while there is no default network and
// runs STATUS on it at CNI 1.1.0 or later; a plugin's code, such as
// [ErrCodePluginNotAvailable] (50) or [ErrCodeLimitedConnectivity] (51), is
// reachable with errors.As. [Manager.NetworkStatuses] reports every loaded
// network.
type NetworkStatus struct {
	Network string
	Default bool
	// Err is nil when the network is ready or its version predates
	// STATUS. A plugin's *types.Error, with codes such as
	// ErrCodePluginNotAvailable, is reachable with errors.As.
	Err error
}

// networkStatuses is [Manager.NetworkStatuses]: see there.
func (ck *checker) networkStatuses(ctx context.Context) []NetworkStatus {
	set := ck.snapshot()
	out := make([]NetworkStatus, 0, set.Len())
	for name, n := range set.All() {
		st := NetworkStatus{Network: name, Default: name == set.DefaultName()}
		if err := ck.cni.status(ctx, n.List); err != nil {
			st.Err = &NetworkError{Network: name, Verb: "STATUS", Err: err}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b NetworkStatus) int { return strings.Compare(a.Network, b.Network) })
	return out
}

// defaultFreshWindow is how long after this manager's ADD of an
// attachment a status of it answers from the ADD's result (see
// [freshAdds]).
const defaultFreshWindow = 5 * time.Second

// maxFresh bounds the attachments freshAdds holds; past it, those older
// than the window are dropped at the next add.
const maxFresh = 1024

// freshAdds remembers, for a short window, the attachments this manager
// has just added, so that a status of the sandbox right after its setup
// (CRI-O asks for one within the same RunPodSandbox) answers from the
// ADD's result without running CHECK: the same plugins just ran ADD with
// the same config, under the same sandbox lock sequence, and succeeded;
// CHECK would prove again, a few milliseconds later, that what they made
// is still there. What it could prove that the ADD did not is only that
// nothing removed it in between: a process outside the library deleting
// the interface, or a plugin's own state, in that window. Where that
// matters, [WithStatusAlwaysChecks] turns this off. A teardown or a forget
// of the sandbox ends its window at once.
//
// mu is a leaf lock.
type freshAdds struct {
	window time.Duration // 0: off
	mu     sync.Mutex
	added  map[string][]freshAdd // by sandbox ID
}

// freshAdd is one ADD: its attachment, when it succeeded, and the config
// it ran with.
type freshAdd struct {
	network, ifname string
	at              time.Time
	config          []byte
}

func newFreshAdds(window time.Duration) *freshAdds {
	return &freshAdds{window: window, added: map[string][]freshAdd{}}
}

// add remembers that p's ADD of sandbox id succeeded now.
func (f *freshAdds) add(id string, p *plan) {
	if f.window <= 0 || p.list == nil {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.added) >= maxFresh {
		for k, as := range f.added {
			if now.Sub(as[len(as)-1].at) >= f.window {
				delete(f.added, k)
			}
		}
		if len(f.added) >= maxFresh {
			return // a status then runs CHECK, as without the window
		}
	}
	as := f.added[id]
	for i := range as {
		if as[i].network == p.Name && as[i].ifname == p.Ifname {
			as = append(as[:i], as[i+1:]...)
			break
		}
	}
	f.added[id] = append(as, freshAdd{network: p.Name, ifname: p.Ifname, at: now, config: p.list.Bytes})
}

// fresh reports whether p's attachment of sandbox id was added by this
// manager within the window, with p's config.
func (f *freshAdds) fresh(id string, p *plan) bool {
	if f.window <= 0 || p.list == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.added[id] {
		if a.network == p.Name && a.ifname == p.Ifname {
			return time.Since(a.at) < f.window && bytes.Equal(a.config, p.list.Bytes)
		}
	}
	return false
}

// forget ends the window of every attachment of sandbox id.
func (f *freshAdds) forget(id string) {
	if f.window <= 0 {
		return
	}
	f.mu.Lock()
	delete(f.added, id)
	f.mu.Unlock()
}

// WithStatusAlwaysChecks makes every status run CHECK. By default, a
// status of an attachment that this manager added less than 5 s before,
// with the same config, answers from the ADD's result without running
// CHECK: CRI-O asks for a status within the same RunPodSandbox as the
// setup, and the CHECK's plugin runs (one a plugin of the chain) would
// only prove again what the ADD just proved. What they could prove that
// the ADD did not is that nothing outside the library removed the
// interface, an address or a plugin's own state in those milliseconds; a
// runtime that wants that proven at once sets this option. A status
// later than that, after a teardown, from another manager, or with
// another config runs CHECK either way.
func WithStatusAlwaysChecks() Option {
	return func(o *options) error {
		o.freshWindow = 0
		return nil
	}
}
