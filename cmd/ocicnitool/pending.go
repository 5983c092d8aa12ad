package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

var pendingCmd = &command{
	name:     "pending",
	synopsis: "[flags]",
	summary:  "list attachments whose DEL failed and is retried in the background",
	help: `Lists, from the attachment records in <cache-dir>/ocicni/attachments, every
attachment whose DEL failed (in a teardown, a rollback or GC) and has not
succeeded since: the runtime's manager retries it in the background with
capped exponential backoff until it succeeds, even when the runtime never
calls again. Shows the attempts so far, when the first failure was and how
long ago (AGE; ageSeconds in JSON), when the next retry is due, and the
last error. "gave up" marks one whose
retries stopped at the horizon (24 h by default): gc collects it. Runs no
plugin.

Examples:
  ocicnitool pending
  ocicnitool pending --json | jq '.[] | select(.gaveUp)'`,
	setup: func(fs *flag.FlagSet, g *globals, out *printer) func(context.Context, []string) error {
		g.dirFlags(fs)
		g.outputFlags(fs)
		return func(_ context.Context, args []string) error {
			if err := wantArgs(args, 0, 0, "none"); err != nil {
				return err
			}
			return runPending(g, out)
		}
	},
}

type pendingJSON struct {
	Container   string     `json:"container"`
	Network     string     `json:"network"`
	IfName      string     `json:"ifname"`
	Attempts    int        `json:"attempts"`
	Since       time.Time  `json:"since"`
	AgeSeconds  float64    `json:"ageSeconds"` // now minus since: how long the attachment has waited for its DEL
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	GaveUp      bool       `json:"gaveUp,omitempty"`
}

func runPending(g *globals, out *printer) error {
	m, err := g.manager()
	if err != nil {
		return err
	}
	defer shutdown(m)
	pending, err := m.PendingTeardowns()
	if err != nil {
		return err
	}
	now := time.Now()
	doc := make([]pendingJSON, 0, len(pending))
	for _, p := range pending {
		doc = append(doc, toPendingJSON(p, now))
	}
	return out.emit(doc, func(t *table) {
		t.head("CONTAINER", "NETWORK", "IFNAME", "ATTEMPTS", "SINCE", "AGE", "NEXT", "LAST ERROR")
		for _, p := range doc {
			next := "gave up"
			if p.NextAttempt != nil {
				next = p.NextAttempt.Format(time.RFC3339)
			}
			t.row(p.Container, p.Network, p.IfName, strconv.Itoa(p.Attempts), p.Since.Format(time.RFC3339),
				shortAge(age(p.Since, now)), next, p.LastError)
		}
	})
}

// toPendingJSON describes p, with its age at now.
func toPendingJSON(p ocicni.PendingTeardown, now time.Time) pendingJSON {
	j := pendingJSON{
		Container: p.ContainerID, Network: p.Network, IfName: p.IfName,
		Attempts: p.Attempts, Since: p.Since, AgeSeconds: age(p.Since, now).Seconds(),
		LastError: p.LastError, GaveUp: p.GaveUp,
	}
	if !p.GaveUp {
		next := p.NextAttempt
		j.NextAttempt = &next
	}
	return j
}

// age is how long before now since was; a since after now (the clock was
// set back) is no age at all.
func age(since, now time.Time) time.Duration {
	return max(now.Sub(since), 0)
}

// shortAge prints an age for a table, to the second, as
// time.Duration.String does ("3m12s", "4h0m5s"), with days past a day:
// "3d4h0m5s", "2d4s", "3d".
func shortAge(d time.Duration) string {
	d = d.Round(time.Second)
	const day = 24 * time.Hour
	if d < day {
		return d.String()
	}
	days, rest := d/day, d%day
	if rest == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, rest)
}
