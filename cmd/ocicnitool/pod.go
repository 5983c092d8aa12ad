package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var addCmd = &command{
	name:     "add",
	synopsis: "[flags] NETNS CONTAINER-ID",
	summary:  "attach a netns to networks (ADD), rolling back on failure",
	help: `Attaches the network namespace NETNS, as the sandbox of container CONTAINER-ID,
to the networks named with --network, in order, or to the default network
(the first valid file in --conf-dir). Interface names are the requested
ones, or eth0, eth1, ... When one network fails, the ones attached before it
are deleted again, and the command fails. Prints each attachment's sandbox
interface and IPs.

Examples:
  # the default network, in the namespace pinned at /run/netns/blue
  ocicnitool add blue 3f2a9c
  # two networks, the second on net1, with the pod's identity in CNI_ARGS
  ocicnitool add --network mynet --network storage:net1 \
      --pod-name web-0 --pod-namespace prod --pod-uid 0b1c... /var/run/netns/cni-1234 3f2a9c
  ocicnitool add --json --conf-dir ./net.d --bin-dir /opt/cni/bin,/usr/libexec/cni blue 3f2a9c`,
	setup: podCommand(true, func(ctx context.Context, _ *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer) error {
		results, err := m.SetUpPodWithContext(ctx, pod)
		if err != nil {
			return err
		}
		return printAttachments(out, pod, results, false)
	}),
}

var checkCmd = &command{
	name:     "check",
	synopsis: "[flags] NETNS CONTAINER-ID",
	summary:  "run CHECK on a sandbox's attachments",
	help: `Checks the attachments of container CONTAINER-ID in NETNS: those named with
--network or, without it, those recorded at ADD (else its cache entries).
Each network at CNI 0.4.0 or later that does not set disableCheck gets the
CHECK verb; the others are only looked up. Fails, naming the network, at the
first attachment that does not pass. Without --network, a container that has
no cache entry and no attachment record is "not found".

Examples:
  ocicnitool check blue 3f2a9c
  ocicnitool check --network storage:net1 blue 3f2a9c && echo healthy`,
	setup: podCommand(true, runCheck),
}

var delCmd = &command{
	name:     "del",
	synopsis: "[flags] [NETNS] CONTAINER-ID",
	summary:  "detach a sandbox (DEL on every attachment), printing each outcome",
	help: `Runs DEL for every attachment of container CONTAINER-ID, even after one fails,
in the reverse of the ADD order, with the config cached at ADD. Without
--network the attachments are found in the cache and the attachment record;
with it, exactly the named ones are deleted. NETNS may be left out, or name
a namespace that is already gone: DEL then runs in the netns recorded at
ADD, or without one, and IPAM reservations are still released.

Prints one row per attachment: deleted, already-gone (the plugin knew
nothing of it), no-config (nothing to run it with; a warning), retry-later,
failed or orphaned. The last three are failures, unless the network's
teardown policy is tolerant. A failed attachment keeps its cache entry and
record, so running del again retries it. Exit code 4 means some attachments
were deleted and some failed; 3 that all that were tried failed.

Examples:
  ocicnitool del blue 3f2a9c
  ocicnitool del 3f2a9c                        # the netns is gone already
  ocicnitool del --network storage:net1 blue 3f2a9c
  ocicnitool del --json 3f2a9c | jq '.outcomes[] | select(.failure)'`,
	setup: podCommand(false, runDel),
}

// podDo runs one pod verb on a manager built from the flags.
type podDo func(ctx context.Context, g *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer) error

// podCommand sets up add, check and del: the directory, output, run and
// pod flags, then "NETNS CONTAINER-ID" (NETNS optional unless needNetNS).
func podCommand(needNetNS bool, do podDo) func(*flag.FlagSet, *globals, *printer) func(context.Context, []string) error {
	return func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		pf := podCommandFlags(fs, g)
		return func(ctx context.Context, args []string) error {
			lo, names := 1, "[NETNS] CONTAINER-ID"
			if needNetNS {
				lo, names = 2, "NETNS CONTAINER-ID"
			}
			if err := wantArgs(args, lo, 2, names); err != nil {
				return err
			}
			return runPod(ctx, g, pf, needNetNS, args, out, do)
		}
	}
}

// podCommandFlags registers the flags of the pod verbs.
func podCommandFlags(fs *flag.FlagSet, g *globals) *podFlags {
	g.dirFlags(fs)
	g.outputFlags(fs)
	g.runFlags(fs)
	pf := &podFlags{}
	pf.register(fs)
	return pf
}

// runPod resolves "[NETNS] CONTAINER-ID", builds the manager and runs do
// under --timeout.
func runPod(ctx context.Context, g *globals, pf *podFlags, needNetNS bool, args []string, out *printer, do podDo) error {
	pod, err := pf.pod(args[len(args)-1])
	if err != nil {
		return err
	}
	if len(args) == 2 {
		if needNetNS {
			pod.NetNS, err = existingNetNS(args[0])
		} else {
			pod.NetNS, err = resolveNetNS(args[0])
		}
		if err != nil {
			return err
		}
	}
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()
	return do(ctx, g, m, pod, out)
}

// requireKnown fails with "not found" when the pod names no networks and
// the library's inventory of it holds neither a cache entry nor an
// attachment record: the library would otherwise report the default
// network, which the pod may never have used.
func requireKnown(g *globals, m *ocicni.Manager, pod ocicni.PodNetwork) error {
	if len(pod.Networks) > 0 {
		return nil
	}
	inv, err := m.Inventory(pod.ID)
	if err != nil {
		return err
	}
	if len(inv.Attachments) > 0 || len(inv.Unusable) > 0 || inv.Recorded {
		return nil
	}
	c, err := g.cache()
	if err != nil {
		return err
	}
	return notFound(fmt.Errorf("container %s has no cache entry and no attachment record in %s (name its networks with --network)",
		pod.ID, c.Dir()))
}

// runCheck runs CHECK through GetPodNetworkStatusWithContext and prints
// each network's verdict.
func runCheck(ctx context.Context, g *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer) error {
	return podStatus(ctx, g, m, pod, out, true)
}

// runStatus prints the sandbox's attachments and IPs; the library call
// is the same as runCheck's.
func runStatus(ctx context.Context, g *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer) error {
	return podStatus(ctx, g, m, pod, out, false)
}

func podStatus(ctx context.Context, g *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer, check bool) error {
	if err := requireKnown(g, m, pod); err != nil {
		return err
	}
	results, err := m.GetPodNetworkStatusWithContext(ctx, pod)
	if err != nil {
		return err
	}
	return printAttachments(out, pod, results, check)
}

// attachmentJSON describes one attachment and its result.
type attachmentJSON struct {
	Network   string          `json:"network"`
	IfName    string          `json:"ifname"`
	Interface string          `json:"interface,omitempty"` // the sandbox interface the result names
	MAC       string          `json:"mac,omitempty"`
	IPs       []string        `json:"ips"`
	Check     string          `json:"check,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

type podJSON struct {
	Container   string           `json:"container"`
	NetNS       string           `json:"netns,omitempty"`
	Attachments []attachmentJSON `json:"attachments"`
}

// describe picks the sandbox interface and IPs of a result. A result
// without them (a plugin that only configures) gives empty fields.
func describe(r ocicni.NetResult) attachmentJSON {
	a := attachmentJSON{Network: r.Name, IfName: r.Ifname, IPs: []string{}}
	if r.Result == nil {
		return a
	}
	if raw, err := json.Marshal(r.Result); err == nil {
		a.Result = raw
	}
	iface, ips, err := ocicni.SandboxIPs(r)
	if err != nil {
		return a
	}
	if iface != nil {
		a.Interface, a.MAC = iface.Name, iface.Mac
	}
	for _, ip := range ips {
		a.IPs = append(a.IPs, ip.Address.String())
	}
	return a
}

func printAttachments(out *printer, pod ocicni.PodNetwork, results []ocicni.NetResult, check bool) error {
	doc := podJSON{Container: pod.ID, NetNS: pod.NetNS, Attachments: make([]attachmentJSON, 0, len(results))}
	for _, r := range results {
		a := describe(r)
		if check {
			a.Check = "ok"
		}
		doc.Attachments = append(doc.Attachments, a)
	}
	return out.emit(doc, func(t *table) {
		head := []string{"NETWORK", "IFNAME", "INTERFACE", "MAC", "IPS"}
		if check {
			head = append(head, "CHECK")
		}
		t.head(head...)
		for _, a := range doc.Attachments {
			cells := []string{a.Network, a.IfName, a.Interface, a.MAC, join(a.IPs)}
			if check {
				cells = append(cells, a.Check)
			}
			t.row(cells...)
		}
	})
}

type outcomeJSON struct {
	Network   string     `json:"network"`
	IfName    string     `json:"ifname"`
	Outcome   string     `json:"outcome"` // deleted, already-gone, no-config, retry-later, failed, orphaned
	Failure   bool       `json:"failure"` // counts as a failure (not tolerated)
	Tolerated bool       `json:"tolerated,omitempty"`
	Policy    string     `json:"policy,omitempty"`
	Error     *errorJSON `json:"error,omitempty"`
}

type teardownJSON struct {
	Container string        `json:"container"`
	Outcomes  []outcomeJSON `json:"outcomes"`
	Deleted   int           `json:"deleted"` // deleted or already gone
	Failed    int           `json:"failed"`
}

// runDel runs the teardown and prints every outcome, whatever the policy.
// Its exit code comes from the outcomes, not from the error's chain: 0
// without failures, 4 when some attachments were deleted and some failed,
// 3 when nothing was.
func runDel(ctx context.Context, _ *globals, m *ocicni.Manager, pod ocicni.PodNetwork, out *printer) error {
	outcomes, err := m.TearDownPodOutcomes(ctx, pod)
	if err != nil && outcomes == nil {
		return err // the request itself was refused
	}
	doc := teardownJSON{Container: pod.ID, Outcomes: make([]outcomeJSON, 0, len(outcomes))}
	for _, o := range outcomes {
		fail := o.Failure() && !o.Tolerated
		doc.Outcomes = append(doc.Outcomes, outcomeJSON{
			Network: o.Network, IfName: o.IfName, Outcome: o.Class.String(),
			Failure: fail, Tolerated: o.Tolerated, Policy: string(o.Policy), Error: toErrorJSON(o.Err),
		})
		switch {
		case fail:
			doc.Failed++
		case o.Class == ocicni.Deleted || o.Class == ocicni.AlreadyGone:
			doc.Deleted++
		}
	}
	if perr := out.emit(doc, func(t *table) {
		t.head("NETWORK", "IFNAME", "OUTCOME", "ERROR")
		for _, o := range doc.Outcomes {
			class := o.Outcome
			if o.Tolerated {
				class += " (tolerated)"
			}
			msg := ""
			if o.Error != nil {
				msg = o.Error.Message
			}
			t.row(o.Network, o.IfName, class, msg)
		}
	}); perr != nil {
		return perr
	}
	if doc.Failed == 0 {
		return nil
	}
	if err == nil { // not expected: a failure that is not tolerated is returned
		err = errors.New("teardown failed")
	}
	summary := fmt.Errorf("%d of %d attachments failed: %w", doc.Failed, len(outcomes), err)
	if doc.Deleted > 0 {
		return withCode(exitPartial, summary)
	}
	return withCode(exitFailed, summary)
}
