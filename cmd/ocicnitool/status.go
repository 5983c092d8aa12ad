package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var statusCmd = &command{
	name:     "status",
	synopsis: "[flags] [NETNS CONTAINER-ID]",
	summary:  "network readiness (STATUS), or a sandbox's attachments and IPs",
	help: `Without arguments, reports whether the node's networks are ready, as a runtime
sees it: the default network must be loaded and pass STATUS (CNI 1.1.0 and
later), and every loaded network gets STATUS too. Config files that were
skipped are listed with the reason (a missing plugin binary, bad JSON, ...).
--network restricts the report, and the exit code, to the named networks;
a name that is not loaded is "not found". Exits 2 (not found) when no
default network is loaded (no valid file in --conf-dir), and 3 when a
reported network, or the default one, is loaded but not ready.

With NETNS and CONTAINER-ID, prints the sandbox's attachments with their
interfaces and IPs, from the cached results (after CHECK, as a runtime's
status query does): those named with --network, else those recorded at ADD,
else the container's cache entries. Without --network, a container that has
no cache entry and no attachment record is "not found".

Examples:
  ocicnitool status
  ocicnitool status --network mynet --json
  ocicnitool status blue 3f2a9c
  ocicnitool status --json blue 3f2a9c | jq -r '.attachments[0].ips[0]'`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		pf := podCommandFlags(fs, g)
		return func(ctx context.Context, args []string) error {
			if len(args) == 0 {
				return runNodeStatus(ctx, g, pf, out)
			}
			if err := wantArgs(args, 2, 2, "[NETNS CONTAINER-ID]"); err != nil {
				return err
			}
			return runPod(ctx, g, pf, true, args, out, runStatus)
		}
	},
}

type networkStatusJSON struct {
	Network string     `json:"network"`
	Default bool       `json:"default"`
	Ready   bool       `json:"ready"`
	Error   *errorJSON `json:"error,omitempty"`
}

type skippedJSON struct {
	File    string `json:"file"`
	Network string `json:"network,omitempty"`
	Reason  string `json:"reason"`
}

type nodeStatusJSON struct {
	Default  string              `json:"default"` // the default network's name, "" when none is loaded
	Ready    bool                `json:"ready"`   // the runtime's view: Status() returned nil
	Error    *errorJSON          `json:"error,omitempty"`
	Networks []networkStatusJSON `json:"networks"`
	Skipped  []skippedJSON       `json:"skipped"`
	// Faults are the node's faults that the library works around, as
	// this process finds them: what a runtime's manager on the node does
	// instead (see ocicni.Health).
	Faults []faultJSON `json:"faults"`
}

type faultJSON struct {
	Part   string `json:"part"`   // "watcher" or "locks"
	Effect string `json:"effect"` // what the library does instead
	Error  string `json:"error"`
}

// runNodeStatus runs StatusWithContext and NetworkStatuses.
func runNodeStatus(ctx context.Context, g *globals, pf *podFlags, out *printer) error {
	want, err := parseNetworks(pf.networks.values)
	if err != nil {
		return err
	}
	g.listsSkips = true
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()

	skipped := m.Skipped()
	statusErr := m.StatusWithContext(ctx)
	if errors.Is(statusErr, ocicni.ErrNoDefaultNetwork) {
		// The library's error repeats the skip reasons, listed below.
		confDir, _ := absDir("conf-dir", g.confDir) // session() accepted it already
		statusErr = noDefaultNetwork(statusErr, confDir, len(skipped))
	}
	doc := nodeStatusJSON{
		Default: m.GetDefaultNetworkName(), Ready: statusErr == nil, Error: toErrorJSON(statusErr),
		Networks: []networkStatusJSON{}, Skipped: []skippedJSON{},
	}
	failed := addNetworkStatuses(ctx, m, want, &doc)
	for _, s := range skipped {
		doc.Skipped = append(doc.Skipped, skippedJSON{File: s.File, Network: s.Network, Reason: errText(s.Err)})
	}
	doc.Faults = nodeFaults(m)
	if err := out.emit(doc, func(t *table) { nodeStatusTable(t, doc) }); err != nil {
		return err
	}
	return nodeStatusError(g, want, doc, failed, statusErr)
}

// addNetworkStatuses adds to doc the STATUS of each loaded network that
// want names (every one when want is empty), and returns the failures.
func addNetworkStatuses(ctx context.Context, m *ocicni.Manager, want []ocicni.NetAttachment, doc *nodeStatusJSON) []error {
	var failed []error
	for _, st := range m.NetworkStatuses(ctx) {
		if len(want) > 0 && !slices.ContainsFunc(want, func(a ocicni.NetAttachment) bool { return a.Name == st.Network }) {
			continue
		}
		doc.Networks = append(doc.Networks, networkStatusJSON{
			Network: st.Network, Default: st.Default, Ready: st.Err == nil, Error: toErrorJSON(st.Err),
		})
		if st.Err != nil {
			failed = append(failed, st.Err)
		}
	}
	return failed
}

// nodeStatusError picks the exit of a node status report, once it is
// printed: a wanted network that is not loaded is "not found" and comes
// first, then failed networks, then, without --network, the runtime's
// view (statusErr).
func nodeStatusError(g *globals, want []ocicni.NetAttachment, doc nodeStatusJSON, failed []error, statusErr error) error {
	var missing []string
	for _, a := range want {
		if !slices.ContainsFunc(doc.Networks, func(n networkStatusJSON) bool { return n.Network == a.Name }) {
			missing = append(missing, a.Name)
		}
	}
	switch {
	case len(missing) > 0:
		err := fmt.Errorf("network %s not loaded from %s", strings.Join(missing, ", "), g.confDir)
		if len(doc.Skipped) > 0 {
			err = fmt.Errorf("%w (see the skipped config files)", err)
		}
		return notFound(err)
	case len(failed) > 0:
		return withCode(exitFailed, errors.Join(failed...))
	case len(want) == 0 && statusErr != nil:
		return statusErr
	}
	return nil
}

func nodeStatusTable(t *table, doc nodeStatusJSON) {
	t.head("NETWORK", "DEFAULT", "STATUS", "ERROR")
	for _, n := range doc.Networks {
		def, state, msg := "", "ready", ""
		if n.Default {
			def = "yes"
		}
		if n.Error != nil {
			state, msg = "not-ready", n.Error.Message
		}
		t.row(n.Network, def, state, msg)
	}
	if len(doc.Skipped) > 0 {
		t.section("SKIPPED CONFIG FILES")
		t.head("FILE", "NETWORK", "REASON")
		for _, s := range doc.Skipped {
			t.row(s.File, s.Network, s.Reason)
		}
	}
	if len(doc.Faults) > 0 {
		t.section("NODE FAULTS WORKED AROUND")
		t.head("PART", "EFFECT", "ERROR")
		for _, f := range doc.Faults {
			t.row(f.Part, f.Effect, f.Error)
		}
	}
}

// nodeFaults probes the node for the faults a runtime's manager works
// around: an fsnotify watcher that cannot be made (no inotify instance
// left for this user: a runtime's watcher then polls its conf dirs), and
// lock files that cannot be used (m's own, as its session found them).
func nodeFaults(m *ocicni.Manager) []faultJSON {
	out := []faultJSON{}
	if fsw, err := fsnotify.NewWatcher(); err != nil {
		out = append(out, faultJSON{
			Part: "watcher", Error: errText(err),
			Effect: "no inotify instance left: a manager started now polls its conf dirs every second",
		})
	} else {
		_ = fsw.Close() // only a probe
	}
	if h := m.Health(); h.LocksDegraded {
		out = append(out, faultJSON{
			Part: "locks", Error: errText(h.LocksError),
			Effect: "the node-wide lock files cannot be used: teardowns run under each process's locks alone, setups refuse",
		})
	}
	return out
}
