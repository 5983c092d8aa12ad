package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var cacheLsCmd = &command{
	name:     "cache ls",
	synopsis: "[flags]",
	summary:  "list libcni cache entries and attachment records",
	help: `Lists the libcni result cache (<cache-dir>/results), one row per entry: its
network, container, interface, netns, file and the IPs of its cached result.
Runs no plugin and needs no config.

An entry is marked "duplicate" when several networks claim the same
container and interface name (two libcni users sharing the cache dir),
"corrupt" when it cannot be a valid entry (empty, truncated, not JSON, names
that disagree with its file name, ...; the reason is shown), "unreadable"
when it could not be read. A corrupt entry's names come from its file name.

A second section lists the attachment records (<cache-dir>/ocicni/
attachments), which keep each container's attachments in ADD order until
their DEL succeeds, so that teardown and gc find attachments whose cache
entry is missing. CACHED tells whether a recorded attachment still has an
entry.

--container and --network filter both sections. With a filter, finding
nothing is "not found" (exit 2).

Examples:
  ocicnitool cache ls
  ocicnitool cache ls --container 3f2a9c
  ocicnitool cache ls --network mynet --json | jq '.entries[] | select(.corrupt)'`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		g.cacheFlag(fs)
		g.outputFlags(fs)
		container := fs.String("container", "", "only this container's entries and record")
		var networks listFlag
		fs.Var(&networks, "network", "only entries and recorded attachments of this network (repeatable, or a comma list)")
		return func(_ context.Context, args []string) error {
			if err := wantArgs(args, 0, 0, "none"); err != nil {
				return err
			}
			return runCacheLs(g, *container, networks.values, out)
		}
	},
}

var cacheRmCmd = &command{
	name:     "cache rm",
	synopsis: "--container CONTAINER-ID [flags]",
	summary:  "drop a container's cache entries, keeping them recorded for gc",
	help: `Removes every libcni cache entry of one container, readable or corrupt, through
the library's ForgetPodCache: before any file goes, each attachment the
entries name is added to the container's attachment record (with its netns),
so that a later gc that does not list the container as valid still runs DEL
for it and releases its IPs. Runs no plugin. Use it instead of deleting
<cache-dir>/results/*<id>* by hand. A container without cache entries is
"not found".

--netns gives the netns for entries that do not name one.

Examples:
  ocicnitool cache rm --container 3f2a9c
  ocicnitool cache rm --container 3f2a9c && ocicnitool gc --valid "$(crictl pods -q | paste -sd,)"`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		g.dirFlags(fs)
		g.outputFlags(fs)
		g.runFlags(fs)
		container := fs.String("container", "", "the container whose entries go (required)")
		netns := fs.String("netns", "", "netns (path or name under "+netnsRunDir+") recorded for entries that name none")
		return func(ctx context.Context, args []string) error {
			if err := wantArgs(args, 0, 0, "none"); err != nil {
				return err
			}
			if *container == "" {
				return usageErr(errors.New("--container is required"))
			}
			return runCacheRm(ctx, g, *container, *netns, out)
		}
	},
}

type entryJSON struct {
	Network    string   `json:"network"`
	Container  string   `json:"container"`
	IfName     string   `json:"ifname"`
	NetNS      string   `json:"netns,omitempty"`
	File       string   `json:"file"`
	IPs        []string `json:"ips"`
	Duplicate  bool     `json:"duplicate"`
	Corrupt    bool     `json:"corrupt"`
	Unreadable bool     `json:"unreadable,omitempty"`
	Reason     string   `json:"reason,omitempty"` // why corrupt or unreadable, or why the result cannot be decoded
	// NamesGuessed is set for a corrupt entry whose names were split from
	// its file name around a known container ID or network.
	NamesGuessed bool `json:"namesGuessed,omitempty"`
}

type recordedJSON struct {
	Network string `json:"network"`
	IfName  string `json:"ifname"`
	NetNS   string `json:"netns,omitempty"`
	Cached  bool   `json:"cached"`
}

type recordJSON struct {
	Container   string         `json:"container"`
	File        string         `json:"file"`
	Attachments []recordedJSON `json:"attachments"`
	Corrupt     bool           `json:"corrupt"`
	Reason      string         `json:"reason,omitempty"`
}

type cacheLsJSON struct {
	CacheDir string       `json:"cacheDir"`
	Entries  []entryJSON  `json:"entries"`
	Records  []recordJSON `json:"records"`
}

func runCacheLs(g *globals, container string, networks []string, out *printer) error {
	c, err := g.cache()
	if err != nil {
		return err
	}
	var listing cache.Listing
	if container != "" {
		listing, err = c.ForContainer(container)
	} else {
		listing, err = c.List()
	}
	if err != nil {
		return err
	}
	ids := []string{container}
	if container == "" {
		if ids, err = c.ListOrders(); err != nil {
			return err
		}
	}
	doc := cacheLsJSON{CacheDir: c.Dir(), Entries: listEntries(listing, networks, ids), Records: []recordJSON{}}
	for _, id := range ids {
		if rec, ok := readRecord(c, id, listing, networks); ok {
			doc.Records = append(doc.Records, rec)
		}
	}
	if err := out.emit(doc, func(t *table) { cacheLsTable(t, doc) }); err != nil {
		return err
	}
	if (container != "" || len(networks) > 0) && len(doc.Entries) == 0 && len(doc.Records) == 0 {
		return notFound(fmt.Errorf("no cache entry or attachment record matches in %s", c.Dir()))
	}
	return nil
}

// listEntries turns a listing into rows, marking duplicates: one
// container and ifname claimed by several networks. The names of a corrupt
// entry that the scan could not split are guessed from its file name,
// around the IDs of recordIDs and of the good entries.
func listEntries(listing cache.Listing, networks, recordIDs []string) []entryJSON {
	keep := func(network string) bool { return len(networks) == 0 || slices.Contains(networks, network) }
	rows := append(entryRows(listing, keep), corruptRows(listing, keep, recordIDs)...)
	markDuplicates(rows)
	slices.SortStableFunc(rows, func(a, b entryJSON) int { return strings.Compare(a.File, b.File) })
	return rows
}

// entryRows gives a row to each readable entry of a network that keep
// accepts, with the IPs of its cached result.
func entryRows(listing cache.Listing, keep func(network string) bool) []entryJSON {
	rows := []entryJSON{}
	for _, e := range listing.Entries {
		if !keep(e.Network) {
			continue
		}
		row := entryJSON{Network: e.Network, Container: e.ContainerID, IfName: e.IfName, NetNS: e.NetNS, File: e.Path, IPs: []string{}}
		res, err := e.Result()
		switch {
		case err != nil:
			row.Reason = "result cannot be decoded: " + err.Error()
		case res != nil:
			row.IPs = describe(ocicni.NetResult{Result: res, NetAttachment: ocicni.NetAttachment{Name: e.Network, Ifname: e.IfName}}).IPs
		}
		rows = append(rows, row)
	}
	return rows
}

// corruptRows gives a row to each corrupt or unreadable entry of a network
// that keep accepts. The filter applies after the names are guessed, so
// that --network also finds a corrupt entry whose names were guessed.
func corruptRows(listing cache.Listing, keep func(network string) bool, recordIDs []string) []entryJSON {
	knownIDs, knownNets := slices.Clone(recordIDs), []string{}
	for _, e := range listing.Entries {
		knownIDs, knownNets = append(knownIDs, e.ContainerID), append(knownNets, e.Network)
	}
	rows := []entryJSON{}
	for _, ee := range listing.Corrupt {
		row := entryJSON{Network: ee.Network, Container: ee.ContainerID, IfName: ee.IfName, File: ee.Path, IPs: []string{}, Reason: errText(ee.Err)}
		if row.Network == "" {
			row.Network, row.Container, row.IfName = cache.GuessFileName(ee.Path, knownIDs, knownNets)
			row.NamesGuessed = row.Network != ""
		}
		if !keep(row.Network) {
			continue
		}
		if errors.Is(ee, cache.ErrCorruptEntry) {
			row.Corrupt = true
		} else {
			row.Unreadable = true
		}
		rows = append(rows, row)
	}
	return rows
}

// markDuplicates flags the rows whose container and ifname are claimed by
// more than one network. Rows without a container or an ifname claim
// nothing.
func markDuplicates(rows []entryJSON) {
	claims := map[[2]string]map[string]bool{}
	for _, r := range rows {
		if r.Container == "" || r.IfName == "" {
			continue
		}
		k := [2]string{r.Container, r.IfName}
		if claims[k] == nil {
			claims[k] = map[string]bool{}
		}
		claims[k][r.Network] = true
	}
	for i, r := range rows {
		rows[i].Duplicate = len(claims[[2]string{r.Container, r.IfName}]) > 1
	}
}

// readRecord reads container id's attachment record. ok is false when
// there is none, or when --network leaves nothing of it.
func readRecord(c *cache.Cache, id string, listing cache.Listing, networks []string) (recordJSON, bool) {
	rec := recordJSON{Container: id, File: filepath.Join(c.OrdersDir(), id), Attachments: []recordedJSON{}}
	atts, err := c.ReadOrder(id)
	if err != nil {
		rec.Corrupt, rec.Reason = errors.Is(err, cache.ErrCorruptEntry), err.Error()
		return rec, len(networks) == 0
	}
	if atts == nil {
		return rec, false
	}
	for _, a := range atts {
		if len(networks) > 0 && !slices.Contains(networks, a.Network) {
			continue
		}
		rec.Attachments = append(rec.Attachments, recordedJSON{
			Network: a.Network, IfName: a.IfName, NetNS: a.NetNS, Cached: cached(listing, id, a.Network, a.IfName),
		})
	}
	return rec, len(networks) == 0 || len(rec.Attachments) > 0
}

// cached tells whether the listing holds an entry, readable or corrupt,
// for the attachment.
func cached(listing cache.Listing, id, network, ifname string) bool {
	for _, e := range listing.Entries {
		if e.ContainerID == id && e.Network == network && e.IfName == ifname {
			return true
		}
	}
	for _, ee := range listing.Corrupt {
		if ee.ContainerID == id && ee.Network == network && ee.IfName == ifname {
			return true
		}
	}
	return false
}

func cacheLsTable(t *table, doc cacheLsJSON) {
	t.row("NETWORK", "CONTAINER", "IFNAME", "NETNS", "IPS", "FILE", "STATE", "REASON")
	for _, e := range doc.Entries {
		var state string
		switch {
		case e.Corrupt:
			state = "corrupt"
		case e.Unreadable:
			state = "unreadable"
		default:
			state = "ok"
		}
		if e.Duplicate {
			state += ",duplicate"
		}
		if e.NamesGuessed {
			state += ",names-guessed"
		}
		t.row(e.Network, e.Container, e.IfName, e.NetNS, join(e.IPs), filepath.Base(e.File), state, e.Reason)
	}
	t.section("ATTACHMENT RECORDS (ADD order)")
	t.row("CONTAINER", "#", "NETWORK", "IFNAME", "NETNS", "CACHED", "STATE")
	for _, r := range doc.Records {
		if r.Reason != "" {
			state := "unreadable: "
			if r.Corrupt {
				state = "corrupt: "
			}
			t.row(r.Container, "", "", "", "", "", state+r.Reason)
			continue
		}
		for i, a := range r.Attachments {
			isCached := "no"
			if a.Cached {
				isCached = "yes"
			}
			t.row(r.Container, strconv.Itoa(i+1), a.Network, a.IfName, a.NetNS, isCached, "ok")
		}
	}
}

type cacheRmJSON struct {
	Container string         `json:"container"`
	Removed   []string       `json:"removed"`
	Record    []recordedJSON `json:"record"` // the attachment record after the removal, for gc
}

func runCacheRm(ctx context.Context, g *globals, id, netnsArg string, out *printer) error {
	netns := ""
	if netnsArg != "" {
		var err error
		if netns, err = resolveNetNS(netnsArg); err != nil {
			return err
		}
	}
	c, err := g.cache()
	if err != nil {
		return err
	}
	listing, err := c.ForContainer(id)
	if err != nil {
		return err
	}
	if len(listing.Entries) == 0 && len(listing.Corrupt) == 0 {
		return notFound(fmt.Errorf("container %s has no cache entry in %s", id, c.ResultsDir()))
	}
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()

	removed, forgetErr := m.ForgetPodCache(ctx, ocicni.PodNetwork{ID: id, NetNS: netns})
	doc := cacheRmJSON{Container: id, Removed: append([]string{}, removed...), Record: []recordedJSON{}}
	atts, rerr := c.ReadOrder(id)
	for _, a := range atts {
		doc.Record = append(doc.Record, recordedJSON{Network: a.Network, IfName: a.IfName, NetNS: a.NetNS})
	}
	if err := out.emit(doc, func(t *table) {
		t.row("REMOVED")
		for _, f := range doc.Removed {
			t.row(f)
		}
		t.section("ATTACHMENT RECORD (kept until DEL succeeds; gc releases these)")
		t.row("#", "NETWORK", "IFNAME", "NETNS")
		for i, a := range doc.Record {
			t.row(strconv.Itoa(i+1), a.Network, a.IfName, a.NetNS)
		}
	}); err != nil {
		return err
	}
	if forgetErr != nil {
		return forgetErr
	}
	return rerr
}
