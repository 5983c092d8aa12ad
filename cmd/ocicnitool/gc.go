package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var gcCmd = &command{
	name:     "gc",
	synopsis: "[flags] (--valid CONTAINER-ID ... | --all)",
	summary:  "delete every attachment no valid container owns (GC)",
	help: `Runs the library's GC, as a runtime does after a restart: every attachment of a
container that is not named with --valid gets DEL (with its cached config,
so networks whose file is gone are collected too), including corrupt cache
entries and attachments that only the attachment record remembers; then
networks at CNI 1.1.0 or later get the GC verb with the valid attachments.

A valid container keeps the attachments it has in the cache and the record,
and the default network on eth0. Listing no container would delete every
attachment on the node, so that takes --all instead.

Prints the attachments that were collected, and those of non-valid
containers that are still there (their DEL failed: see the errors; running
gc again retries). The cache is compared before and after GC to find them.

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
	Valid     []string       `json:"valid"`
	Collected []gcAttachment `json:"collected"`
	Left      []gcAttachment `json:"left"` // attachments of non-valid containers still present
	Errors    []*errorJSON   `json:"errors"`
}

// gcAttachment is one attachment GC looked at, from a cache entry (File
// set) or from an attachment record (Recorded).
type gcAttachment struct {
	Container string `json:"container"`
	Network   string `json:"network"`
	IfName    string `json:"ifname"`
	File      string `json:"file,omitempty"`
	Recorded  bool   `json:"recorded,omitempty"`
}

// same tells whether a and b are one attachment: by container, network
// and ifname, or by file for a corrupt entry whose name could not be split.
func (a gcAttachment) same(b gcAttachment) bool {
	if a.Network == "" || b.Network == "" {
		return a.File == b.File
	}
	return a.Container == b.Container && a.Network == b.Network && a.IfName == b.IfName
}

func runGC(ctx context.Context, g *globals, validIDs []string, out *printer) error {
	pods := make([]*ocicni.PodNetwork, 0, len(validIDs))
	for _, id := range validIDs {
		if err := cache.ValidateContainerID(id); err != nil {
			return usageErr(fmt.Errorf("--valid: %w", err))
		}
		pods = append(pods, &ocicni.PodNetwork{ID: id})
	}
	c, err := g.cache()
	if err != nil {
		return err
	}
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()

	before := gcSnapshot(c, validIDs)
	gcErr := m.GC(ctx, pods)
	after := gcSnapshot(c, validIDs)

	doc := gcJSON{Valid: validIDs, Collected: []gcAttachment{}, Left: []gcAttachment{}, Errors: []*errorJSON{}}
	for _, a := range before {
		if slices.ContainsFunc(after, a.same) {
			doc.Left = append(doc.Left, a)
		} else {
			doc.Collected = append(doc.Collected, a)
		}
	}
	for _, e := range unjoin(gcErr) {
		doc.Errors = append(doc.Errors, toErrorJSON(e))
	}
	if err := out.emit(doc, func(t *table) {
		t.row("CONTAINER", "NETWORK", "IFNAME", "STATE", "FILE")
		for _, list := range []struct {
			state string
			atts  []gcAttachment
		}{{"collected", doc.Collected}, {"left", doc.Left}} {
			for _, a := range list.atts {
				file := a.File
				if a.Recorded {
					file = "(attachment record)"
				}
				t.row(a.Container, a.Network, a.IfName, list.state, file)
			}
		}
	}); err != nil {
		return err
	}
	return withCode(exitFailed, gcErr)
}

// gcSnapshot lists the attachments of non-valid containers: cache entries,
// corrupt ones by their file name, and recorded attachments that have no
// entry. Read errors only make the report less complete; GC reports its own.
func gcSnapshot(c *cache.Cache, validIDs []string) []gcAttachment {
	var atts []gcAttachment
	listing, _ := c.List()
	for _, e := range listing.Entries {
		if !slices.Contains(validIDs, e.ContainerID) {
			atts = append(atts, gcAttachment{Container: e.ContainerID, Network: e.Network, IfName: e.IfName, File: e.Path})
		}
	}
	for _, ee := range listing.Corrupt {
		if !slices.Contains(validIDs, ee.ContainerID) || ee.ContainerID == "" {
			atts = append(atts, gcAttachment{Container: ee.ContainerID, Network: ee.Network, IfName: ee.IfName, File: ee.Path})
		}
	}
	ids, _ := c.ListOrders()
	for _, id := range ids {
		if slices.Contains(validIDs, id) {
			continue
		}
		recorded, _ := c.ReadOrder(id)
		for _, r := range recorded {
			if !slices.ContainsFunc(atts, func(a gcAttachment) bool {
				return a.Container == id && a.Network == r.Network && a.IfName == r.IfName
			}) {
				atts = append(atts, gcAttachment{Container: id, Network: r.Network, IfName: r.IfName, Recorded: true})
			}
		}
	}
	return atts
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
