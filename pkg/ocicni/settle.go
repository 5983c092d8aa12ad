package ocicni

import (
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// maxLastErrorLen bounds the error message a record keeps for operators.
const maxLastErrorLen = 1024

// settle writes sandbox id's order record after DELs (a teardown, a
// rollback, GC or a heal retry) from the record as read under the
// sandbox's lock before the DELs (recorded, rerr):
//   - an attachment leaves the record once its DEL succeeded or its
//     plugin said it is gone;
//   - a failed one stays, or is added when only its cache entry knew it
//     (with its config saved, so that it can be deleted when the entry is
//     removed by hand), with its retry state updated (see [HealPolicy]);
//     with healing on, the retry is scheduled;
//   - an attachment in never (a setup recorded it, but never added it)
//     leaves the record;
//   - an unreadable record cannot guide anything: it goes when no DEL
//     failed, and is replaced by the failed attachments otherwise.
//
// The saved configs that the record no longer uses go with it. Failures
// to write are logged: the record then stays as it was, which costs at
// most a harmless repeated DEL.
func (m *Manager) settle(id string, recorded []cache.Attachment, rerr error, never []NetAttachment, plans []*plan,
	outcomes []Outcome, log *logrus.Entry,
) {
	next, changed := m.nextRecord(id, recorded, never, plans, outcomes, log)
	if rerr == nil && !changed {
		return
	}
	var err error
	if len(next) == 0 {
		err = m.cache.RemoveOrder(id)
	} else {
		err = m.cache.WriteOrder(id, next)
	}
	if err != nil {
		log.WithError(err).Warn("Cannot update attachment order record")
		return
	}
	if err := m.cache.ReleaseConfigs(id, unusedConfigs(recorded, next)...); err != nil {
		log.WithError(err).Warn("Cannot remove saved configs that the attachment order record no longer uses; GC removes them")
	}
	if due, ok := earliestHeal(next); ok {
		m.healer.schedule(id, due)
	}
}

// nextRecord returns what sandbox id's order record holds after the DELs
// whose outcomes are given, and whether that differs from recorded: the
// lines of never and of deleted attachments go, failed ones stay or are
// added (see lineFor) with their heal state updated.
func (m *Manager) nextRecord(id string, recorded []cache.Attachment, never []NetAttachment, plans []*plan,
	outcomes []Outcome, log *logrus.Entry,
) ([]cache.Attachment, bool) {
	next := slices.DeleteFunc(slices.Clone(recorded), func(a cache.Attachment) bool {
		return slices.Contains(never, NetAttachment{Name: a.Network, Ifname: a.IfName})
	})
	changed := len(next) < len(recorded)
	now := time.Now()
	for _, o := range outcomes {
		if o.ContainerID != id || o.Network == "" {
			continue
		}
		i := slices.IndexFunc(next, func(a cache.Attachment) bool { return a.Network == o.Network && a.IfName == o.IfName })
		switch {
		case (o.Class == Deleted || o.Class == AlreadyGone) && i >= 0:
			next = slices.Delete(next, i, i+1)
			changed = true
		case o.Failure():
			if i < 0 {
				line, ok := m.lineFor(plans, o, log)
				if !ok {
					continue
				}
				next = append(next, line)
				i = len(next) - 1
			}
			m.markFailed(&next[i], o, now, log)
			changed = true
		}
	}
	return next, changed
}

// lineFor builds the record line of a failed attachment that only its
// cache entry knew, saving the config its DEL ran with.
func (m *Manager) lineFor(plans []*plan, o Outcome, log *logrus.Entry) (cache.Attachment, bool) {
	line := cache.Attachment{Network: o.Network, IfName: o.IfName}
	i := slices.IndexFunc(plans, func(p *plan) bool { return p.Name == o.Network && p.Ifname == o.IfName })
	if i < 0 || plans[i].list == nil {
		return line, false // nothing to delete it with: the cache entry, if any, stays
	}
	p := plans[i]
	if p.rt != nil {
		line.NetNS = p.rt.NetNS
	}
	digest, err := m.cache.SaveConfig(p.id, p.list.Bytes)
	if err != nil {
		planLog(log, p, "DEL").WithError(err).Warn("Cannot save the config of a failed attachment")
	} else {
		line.Config = digest
	}
	return line, true
}

// markFailed updates the heal state of a record line after a failed DEL.
// It does so with healing off too: the state then tells operators
// ([Manager.PendingTeardowns]) and a manager started later with healing
// on, which resumes the retries.
func (m *Manager) markFailed(a *cache.Attachment, o Outcome, now time.Time, log *logrus.Entry) {
	pol := m.opts.heal
	h := a.Heal
	if h == nil {
		h = &cache.Heal{Since: now}
		a.Heal = h
	}
	h.Attempts++
	if o.Err != nil {
		h.LastError = truncate(o.Err.Error(), maxLastErrorLen)
	}
	if h.GaveUp {
		return
	}
	if now.Sub(h.Since) >= pol.Horizon {
		h.GaveUp, h.Next = true, time.Time{}
		log.WithFields(logrus.Fields{
			"network": a.Network, "ifname": a.IfName, "attempts": h.Attempts, "since": h.Since,
		}).WithError(o.Err).Warn("Giving up retrying the DEL of an attachment; it stays recorded for GC")
		return
	}
	h.Next = now.Add(pol.backoff(h.Attempts))
}

// removeStrays removes what a setup killed before it wrote its record may
// have left for sandbox id: links to saved configs and a temporary record
// (see [cache.Cache.RemoveStrays]). The caller holds the sandbox's lock
// and found no record. A failure is logged: GC removes the strays later.
func (m *Manager) removeStrays(id string, log *logrus.Entry) {
	if err := m.cache.RemoveStrays(id); err != nil {
		log.WithError(err).Warn("Cannot remove the saved-config links of a sandbox without an attachment order record")
	}
}

// unusedConfigs returns the saved configs that before uses and after does
// not.
func unusedConfigs(before, after []cache.Attachment) []string {
	var out []string
	for _, a := range before {
		if a.Config != "" && !slices.Contains(out, a.Config) &&
			!slices.ContainsFunc(after, func(b cache.Attachment) bool { return b.Config == a.Config }) {
			out = append(out, a.Config)
		}
	}
	return out
}

// earliestHeal returns when the first pending retry of a record is due.
func earliestHeal(record []cache.Attachment) (time.Time, bool) {
	var due time.Time
	for _, a := range record {
		if h := a.Heal; h != nil && !h.GaveUp && (due.IsZero() || h.Next.Before(due)) {
			due = h.Next
		}
	}
	return due, !due.IsZero()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
