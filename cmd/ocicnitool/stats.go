package main

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var statsCmd = &command{
	name:     "stats",
	synopsis: "[flags]",
	summary:  "node figures: sandboxes, attachments by network, cache entries, pending DELs",
	help: `Prints the figures of this node that a runtime's manager would export, read
from the cache dir without a runtime, as the library's inventory
(Manager.Inventories) holds them for teardown and gc:

  sandboxes     every sandbox that cache entries or an attachment record
                know of: how many have a record, how many a cache file,
                how many records are unreadable
  networks      attachments by network: how many, how many have a cache
                file, how many wait for a DEL retry
  cache entries the files in <cache-dir>/results: corrupt, unreadable,
                unowned (corrupt or unreadable, and naming no container),
                duplicate (their container and ifname claimed by several
                networks), as "cache ls" marks them
  pending       attachments whose DEL failed (see "pending"): how many,
                how many gave up, how many retries are due now, the age
                of the oldest (first failure; given-up ones included) and
                when the next retry is due

The cache is read only; no plugin runs and no conf dir is needed. With
--conf (implied by --conf-dir or --bin-dir) the conf dir is loaded too, as
a runtime loads it (which runs the VERSION of the plugins its files name),
to add the networks loaded, the default one and the files skipped with the
reason; the loaded networks then also help name corrupt cache files, as
they do for gc. Exits 0 whatever the figures are, except that with --conf
a conf dir that gives no default network (no valid file) is "not found":
the figures are printed all the same, then the command says so and exits 2.

Examples:
  ocicnitool stats
  ocicnitool stats --conf
  ocicnitool stats --json | jq '.pending.dueNow, .pending.oldestAgeSeconds'`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		g.dirFlags(fs)
		g.outputFlags(fs)
		withConf := fs.Bool("conf", false, "also load the conf dir: networks loaded and files skipped (runs the plugins' VERSION)")
		return func(_ context.Context, args []string) error {
			if err := wantArgs(args, 0, 0, "none"); err != nil {
				return err
			}
			fs.Visit(func(f *flag.Flag) {
				if f.Name == "conf-dir" || f.Name == "bin-dir" {
					*withConf = true
				}
			})
			return runStats(g, *withConf, out)
		}
	},
}

// statsJSON is the document of stats; nodeStats computes it but for the
// directories and the conf dir's view.
type statsJSON struct {
	CacheDir string `json:"cacheDir"`
	// At is when the figures were read: ages and due retries count from it.
	At        time.Time        `json:"at"`
	Sandboxes sandboxStatsJSON `json:"sandboxes"`
	// Attachments counts every sandbox's attachments; Networks, sorted by
	// name, splits them by network.
	Attachments int                `json:"attachments"`
	Networks    []networkStatsJSON `json:"networks"`
	Entries     entryStatsJSON     `json:"entries"`
	Pending     pendingStatsJSON   `json:"pending"`
	Config      *confStatsJSON     `json:"config,omitempty"` // with --conf
}

type sandboxStatsJSON struct {
	Total             int `json:"total"`             // known to cache entries or attachment records
	Recorded          int `json:"recorded"`          // with an attachment record, readable or not
	Cached            int `json:"cached"`            // with a cache file, readable or not
	UnreadableRecords int `json:"unreadableRecords"` // whose record cannot be read
}

type networkStatsJSON struct {
	Network     string `json:"network"`
	Attachments int    `json:"attachments"`
	Cached      int    `json:"cached"`  // with a cache file, readable or not
	Pending     int    `json:"pending"` // whose DEL failed, retried or given up
}

type entryStatsJSON struct {
	Total      int `json:"total"` // cache files, readable or not
	Corrupt    int `json:"corrupt"`
	Unreadable int `json:"unreadable"`
	Unowned    int `json:"unowned"`   // corrupt or unreadable, naming no container even guessed
	Duplicate  int `json:"duplicate"` // their container and ifname claimed by several networks
}

type pendingStatsJSON struct {
	Total  int `json:"total"`
	GaveUp int `json:"gaveUp"`
	DueNow int `json:"dueNow"` // not given up, next retry at or before At
	// OldestSince is the earliest first failure, given-up ones included,
	// and OldestAgeSeconds its age at At (0 when nothing is pending).
	OldestSince      *time.Time `json:"oldestSince,omitempty"`
	OldestAgeSeconds float64    `json:"oldestAgeSeconds"`
	// NextAttempt is when the earliest retry not given up is due.
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
}

type confStatsJSON struct {
	ConfDir  string        `json:"confDir"`
	Default  string        `json:"default"` // "" when no network is loaded
	Networks []string      `json:"networks"`
	Skipped  []skippedJSON `json:"skipped"`
}

func runStats(g *globals, withConf bool, out *printer) error {
	c, err := g.cache()
	if err != nil {
		return err
	}
	newManager := g.cacheManager
	if withConf {
		newManager = g.manager
		g.listsSkips = true
	}
	m, err := newManager()
	if err != nil {
		return err
	}
	defer shutdown(m)
	invs, unowned, err := m.Inventories()
	if err != nil {
		return err
	}
	doc := nodeStats(invs, unowned, time.Now())
	doc.CacheDir = c.Dir()
	if withConf {
		// manager() accepted the flag already.
		confDir, _ := absDir("conf-dir", g.confDir)
		doc.Config = confStats(m, confDir)
	}
	if err := out.emit(doc, func(t *table) { statsTable(t, doc) }); err != nil {
		return err
	}
	if c := doc.Config; c != nil && c.Default == "" {
		return noDefaultNetwork(nil, c.ConfDir, len(c.Skipped))
	}
	return nil
}

// confStats is the conf dir's view of m.
func confStats(m *ocicni.Manager, confDir string) *confStatsJSON {
	cs := &confStatsJSON{
		ConfDir: confDir, Default: m.GetDefaultNetworkName(),
		Networks: append([]string{}, m.Networks()...), Skipped: []skippedJSON{},
	}
	for _, s := range m.Skipped() {
		cs.Skipped = append(cs.Skipped, skippedJSON{File: s.File, Network: s.Network, Reason: errText(s.Err)})
	}
	return cs
}

func statsTable(t *table, doc statsJSON) {
	itoa := strconv.Itoa
	t.head("SANDBOXES", "RECORDED", "CACHED", "UNREADABLE RECORDS", "ATTACHMENTS")
	s := doc.Sandboxes
	t.row(itoa(s.Total), itoa(s.Recorded), itoa(s.Cached), itoa(s.UnreadableRecords), itoa(doc.Attachments))

	t.section("CACHE ENTRIES")
	e := doc.Entries
	t.head("TOTAL", "CORRUPT", "UNREADABLE", "UNOWNED", "DUPLICATE")
	t.row(itoa(e.Total), itoa(e.Corrupt), itoa(e.Unreadable), itoa(e.Unowned), itoa(e.Duplicate))

	t.section("PENDING TEARDOWNS")
	p := doc.Pending
	oldest, next := "", ""
	if p.OldestSince != nil {
		oldest = shortAge(time.Duration(p.OldestAgeSeconds * float64(time.Second)))
	}
	if p.NextAttempt != nil {
		next = p.NextAttempt.Format(time.RFC3339)
	}
	t.head("TOTAL", "GAVE UP", "DUE NOW", "OLDEST", "NEXT")
	t.row(itoa(p.Total), itoa(p.GaveUp), itoa(p.DueNow), oldest, next)

	t.section("ATTACHMENTS BY NETWORK")
	t.head("NETWORK", "ATTACHMENTS", "CACHED", "PENDING")
	for _, n := range doc.Networks {
		t.row(n.Network, itoa(n.Attachments), itoa(n.Cached), itoa(n.Pending))
	}

	if c := doc.Config; c != nil {
		t.section("NETWORKS LOADED FROM " + c.ConfDir)
		t.head("NETWORK", "DEFAULT")
		for _, n := range c.Networks {
			def := ""
			if n == c.Default {
				def = "yes"
			}
			t.row(n, def)
		}
		t.section("SKIPPED CONFIG FILES")
		t.head("FILE", "NETWORK", "REASON")
		for _, sk := range c.Skipped {
			t.row(sk.File, sk.Network, sk.Reason)
		}
	}
}
