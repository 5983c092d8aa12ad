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
	m, err := g.cacheManager()
	if err != nil {
		return err
	}
	defer shutdown(m)
	invs, unowned, err := inventories(m, container)
	if err != nil {
		return err
	}
	doc := cacheLsJSON{CacheDir: c.Dir(), Entries: listEntries(invs, unowned, networks), Records: []recordJSON{}}
	for _, inv := range invs {
		if rec, ok := recordRow(c.OrdersDir(), inv, networks); ok {
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

// inventories returns the library's inventory of container, or of every
// sandbox the cache dir knows of when container is "", with the corrupt
// files that name no container.
func inventories(m *ocicni.Manager, container string) ([]*ocicni.SandboxInventory, []*cache.EntryError, error) {
	if container == "" {
		return m.Inventories()
	}
	inv, err := m.Inventory(container)
	if err != nil {
		return nil, nil, err
	}
	return []*ocicni.SandboxInventory{inv}, nil, nil
}

// listEntries gives a row to each cache file of the inventories, and to
// each unowned one, of a network in networks (every network when empty),
// sorted by file, and marks duplicates: one container and ifname claimed
// by several networks. The filter applies to the names the library gave a
// corrupt file, guessed ones included, so that --network also finds a
// corrupt entry whose names were guessed.
func listEntries(invs []*ocicni.SandboxInventory, unowned []*cache.EntryError, networks []string) []entryJSON {
	rows := []entryJSON{}
	add := func(row entryJSON) {
		if len(networks) == 0 || slices.Contains(networks, row.Network) {
			rows = append(rows, row)
		}
	}
	for _, inv := range invs {
		for _, a := range inv.Attachments {
			switch {
			case a.Entry != nil:
				add(entryRow(a.Entry))
			case a.Corrupt != nil:
				add(corruptRow(a.Corrupt, a.NamesGuessed))
			}
		}
		for _, ee := range inv.Unusable {
			add(corruptRow(ee, false))
		}
	}
	for _, ee := range unowned {
		add(corruptRow(ee, false))
	}
	markDuplicates(rows)
	slices.SortStableFunc(rows, func(a, b entryJSON) int { return strings.Compare(a.File, b.File) })
	return rows
}

// entryRow is the row of a readable entry, with the IPs of its cached
// result.
func entryRow(e *cache.Entry) entryJSON {
	row := entryJSON{Network: e.Network, Container: e.ContainerID, IfName: e.IfName, NetNS: e.NetNS, File: e.Path, IPs: []string{}}
	res, err := e.Result()
	switch {
	case err != nil:
		row.Reason = "result cannot be decoded: " + err.Error()
	case res != nil:
		row.IPs = describe(ocicni.NetResult{Result: res, NetAttachment: ocicni.NetAttachment{Name: e.Network, Ifname: e.IfName}}).IPs
	}
	return row
}

// corruptRow is the row of a corrupt or unreadable entry, with the names
// the library gave it (guessed: split from its file name).
func corruptRow(ee *cache.EntryError, guessed bool) entryJSON {
	return entryJSON{
		Network: ee.Network, Container: ee.ContainerID, IfName: ee.IfName, File: ee.Path, IPs: []string{},
		Reason: errText(ee.Err), NamesGuessed: guessed,
		Corrupt: errors.Is(ee, cache.ErrCorruptEntry), Unreadable: !errors.Is(ee, cache.ErrCorruptEntry),
	}
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

// recordRow describes the attachment record of inv, from the library's
// inventory: its recorded attachments in ADD order, each cached when a
// cache file (readable or corrupt) names it. ok is false when there is no
// record, or when --network leaves nothing of it.
func recordRow(ordersDir string, inv *ocicni.SandboxInventory, networks []string) (recordJSON, bool) {
	rec := recordJSON{Container: inv.ContainerID, File: filepath.Join(ordersDir, inv.ContainerID), Attachments: []recordedJSON{}}
	if err := inv.RecordErr; err != nil {
		rec.Corrupt, rec.Reason = errors.Is(err, cache.ErrCorruptEntry), err.Error()
		return rec, len(networks) == 0
	}
	if !inv.Recorded {
		return rec, false
	}
	for _, a := range inv.Attachments {
		if a.Record == nil || len(networks) > 0 && !slices.Contains(networks, a.Name) {
			continue
		}
		rec.Attachments = append(rec.Attachments, recordedJSON{
			Network: a.Name, IfName: a.Ifname, NetNS: a.Record.NetNS, Cached: a.CacheFile() != "",
		})
	}
	return rec, len(networks) == 0 || len(rec.Attachments) > 0
}

func cacheLsTable(t *table, doc cacheLsJSON) {
	t.head("NETWORK", "CONTAINER", "IFNAME", "NETNS", "IPS", "FILE", "STATE", "REASON")
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
	t.head("CONTAINER", "#", "NETWORK", "IFNAME", "NETNS", "CACHED", "STATE")
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
	m, ctx, end, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer end()
	inv, err := m.Inventory(id)
	if err != nil {
		return err
	}
	if !hasCacheFiles(inv) {
		return notFound(fmt.Errorf("container %s has no cache entry in %s", id, c.ResultsDir()))
	}

	removed, forgetErr := m.ForgetPodCache(ctx, ocicni.PodNetwork{ID: id, NetNS: netns})
	doc := cacheRmJSON{Container: id, Removed: append([]string{}, removed...), Record: []recordedJSON{}}
	after, rerr := m.Inventory(id)
	if rerr == nil {
		rerr = after.RecordErr
		for _, a := range after.Attachments {
			if a.Record != nil {
				doc.Record = append(doc.Record, recordedJSON{Network: a.Name, IfName: a.Ifname, NetNS: a.Record.NetNS})
			}
		}
	}
	if err := out.emit(doc, func(t *table) {
		t.head("REMOVED")
		for _, f := range doc.Removed {
			t.row(f)
		}
		t.section("ATTACHMENT RECORD (kept until DEL succeeds; gc releases these)")
		t.head("#", "NETWORK", "IFNAME", "NETNS")
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

// hasCacheFiles reports whether inv holds a cache file, readable or not.
func hasCacheFiles(inv *ocicni.SandboxInventory) bool {
	return len(inv.Unusable) > 0 || slices.ContainsFunc(inv.Attachments, func(a ocicni.InventoryAttachment) bool {
		return a.CacheFile() != ""
	})
}
