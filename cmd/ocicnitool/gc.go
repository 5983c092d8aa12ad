package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var gcCmd = &command{
	name:     "gc",
	synopsis: "[flags] (--valid CONTAINER-ID ... | --all)",
	summary:  "delete every attachment no valid container owns (GC)",
	help: `Runs the library's GC, as a runtime does after a restart: every attachment of a
container that is not named with --valid gets DEL, if it is the library's:
those the attachment record names (with their cached or saved config, so
networks whose file is gone are collected too, and attachments that only
the record remembers), and the cache entries, corrupt ones too, of the
networks in the conf dir. Another runtime's cache entries in the same cache
dir (no record, a network not in the conf dir) are left alone. Then
networks at CNI 1.1.0 or later get the GC verb with the valid attachments.

A valid container keeps the attachments it has in the cache and the record,
and the default network on eth0. Listing no container would delete every
attachment of the library's on the node, so that takes --all instead.

Prints what GC did to each attachment of a non-valid container, in the
order its DELs ran: its outcome (deleted, already-gone, retry-later, failed,
orphaned, no-config) and error. A failed one stays in the cache or the
attachment record, and running gc again retries it. With --json, outcomes
lists them, collected counts those deleted or already gone, left those that
failed, and errors holds every error GC returned (the GC verbs' too).

Examples:
  # keep the two running sandboxes, collect everything else
  ocicnitool gc --valid 3f2a9c --valid 77b0e1
  ocicnitool gc --valid "$(crictl pods -q | paste -sd,)"
  ocicnitool gc --all --json`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		g.dirFlags(fs)
		g.outputFlags(fs)
		g.runFlags(fs)
		var valid listFlag
		fs.Var(&valid, "valid", "ID of a container whose attachments stay (repeatable, or a comma list)")
		all := fs.Bool("all", false, "no container is valid: collect every attachment on the node")
		return func(ctx context.Context, args []string) error {
			if err := wantArgs(args, 0, 0, "none"); err != nil {
				return err
			}
			switch {
			case len(valid.values) == 0 && !*all:
				return usageErr(errors.New("name the valid containers with --valid, or pass --all to collect everything"))
			case len(valid.values) > 0 && *all:
				return usageErr(errors.New("--valid and --all exclude each other"))
			}
			return runGC(ctx, g, valid.values, out)
		}
	},
}

type gcJSON struct {
	Valid     []string        `json:"valid"`
	Outcomes  []gcOutcomeJSON `json:"outcomes"`  // in the order GC ran the DELs
	Collected int             `json:"collected"` // deleted or already gone
	Left      int             `json:"left"`      // failed: still there, for the next gc
	Errors    []*errorJSON    `json:"errors"`    // every error GC returned
}

// gcOutcomeJSON is what GC did to one attachment of a non-valid container.
type gcOutcomeJSON struct {
	Container string     `json:"container"`
	Network   string     `json:"network"`
	IfName    string     `json:"ifname"`
	Outcome   string     `json:"outcome"` // deleted, already-gone, no-config, retry-later, failed, orphaned
	Failure   bool       `json:"failure"`
	Error     *errorJSON `json:"error,omitempty"`
}

func runGC(ctx context.Context, g *globals, validIDs []string, out *printer) error {
	pods := make([]*ocicni.PodNetwork, 0, len(validIDs))
	for _, id := range validIDs {
		if err := cache.ValidateContainerID(id); err != nil {
			return usageErr(fmt.Errorf("--valid: %w", err))
		}
		pods = append(pods, &ocicni.PodNetwork{ID: id})
	}
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()

	outcomes, gcErr := m.GCOutcomes(ctx, pods)
	doc := gcJSON{Valid: validIDs, Outcomes: make([]gcOutcomeJSON, 0, len(outcomes)), Errors: []*errorJSON{}}
	for _, o := range outcomes {
		doc.Outcomes = append(doc.Outcomes, gcOutcomeJSON{
			Container: o.ContainerID, Network: o.Network, IfName: o.IfName,
			Outcome: o.Class.String(), Failure: o.Failure(), Error: toErrorJSON(o.Err),
		})
		switch {
		case o.Failure():
			doc.Left++
		case o.Class == ocicni.Deleted || o.Class == ocicni.AlreadyGone:
			doc.Collected++
		}
	}
	for _, e := range unjoin(gcErr) {
		doc.Errors = append(doc.Errors, toErrorJSON(e))
	}
	if err := out.emit(doc, func(t *table) {
		t.head("CONTAINER", "NETWORK", "IFNAME", "OUTCOME", "ERROR")
		for _, o := range doc.Outcomes {
			msg := ""
			if o.Error != nil {
				msg = o.Error.Message
			}
			t.row(o.Container, o.Network, o.IfName, o.Outcome, msg)
		}
	}); err != nil {
		return err
	}
	return withCode(exitFailed, gcErr)
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}
