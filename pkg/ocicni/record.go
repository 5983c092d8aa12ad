package ocicni

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"

	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
)

// This file is the engine's one door to the attachment order records
// (see [WithCacheDir]): it alone writes, removes and
// lists them, through the ledger. Every writer computes the next record
// with [nextRecord] (below) and commits it, with the cache
// entries it drops, with [sandboxStore.commit]; every listing is
// [sandboxStore.scanRecords].

// commit makes ch sandbox id's next state, whole or not at all (see
// [ledger.Ledger.Commit]): its record, the cache entries it drops, the
// saved configs it releases and the strays. What a crash or a failure
// leaves after the record (see the ledger's leftover) is logged: GC
// removes it. The healer learns what the record leaves pending, with
// ctx's span as the operation that left it (see [healer.track]), and a
// retry left pending is marked for the other engines to adopt.
func (st *sandboxStore) commit(ctx context.Context, id string, ch ledger.Change, log *logrus.Entry) error {
	hs := pendingHeal(ch.Next)
	leftover, err := st.led.Commit(id, ch)
	if err != nil {
		return err
	}
	if leftover != nil {
		log.WithError(leftover).Warn("Cannot remove what the attachment order record no longer uses; GC removes it")
	}
	if !ch.Keep {
		if !hs.due.IsZero() {
			if err := st.led.MarkRetries(); err != nil {
				log.WithError(err).Warn("Cannot tell other engines of a pending DEL retry; this one retries it while it runs")
			}
		}
		st.track(id, hs, trace.SpanContextFromContext(ctx))
	}
	return nil
}

// recordSetup saves the config of every plan and writes the sandbox's
// order record, both durably, before any ADD runs, so that whatever a
// crash or a power loss interrupts can still be deleted. It returns the
// record (see [recordChange.added]), which replaces old, the record as
// the setup's inventory read it under the sandbox's lock (nil for none,
// or an unreadable one, which is replaced).
//
// When a step fails (a full disk, an I/O error), it takes back what it
// wrote before it returns (see [sandboxStore.undoSetup]), so that a setup that
// attached nothing leaves nothing, and what an earlier record of the
// sandbox, or another sandbox's, still uses stays.
func (st *sandboxStore) recordSetup(ctx context.Context, pod *PodNetwork, plans []*plan, old []cache.Attachment, log *logrus.Entry) ([]cache.Attachment, error) {
	added := make([]cache.Attachment, 0, len(plans))
	saves := make([]cache.ConfigSave, 0, len(plans))
	for _, p := range plans {
		s, err := st.led.SaveConfig(pod.ID, p.list.Bytes)
		if err != nil {
			return nil, st.undoSetup(saves, fmt.Errorf("saving the config of network %s: %w", p.Name, err))
		}
		saves = append(saves, s)
		added = append(added, cache.Attachment{Network: p.Name, IfName: p.Ifname, NetNS: pod.NetNS, Config: s.Digest})
	}
	next, _ := nextRecord(pod.ID, old, recordChange{added: added}, st.heal, time.Now(), log)
	if err := st.commit(ctx, pod.ID, ledger.Change{Old: old, Next: next}, log); err != nil {
		return nil, st.undoSetup(saves, fmt.Errorf("writing the attachment order record: %w", err))
	}
	return next, nil
}

// undoSetup takes back the saved configs' links and copies that a failed
// [sandboxStore.recordSetup] made (the record is as it was: see
// [ledger.Ledger.Commit]), and returns cause, joined with the failures of
// the undo.
func (st *sandboxStore) undoSetup(saves []cache.ConfigSave, cause error) error {
	errs := []error{cause}
	for _, s := range saves {
		if err := st.led.UndoSaveConfig(s); err != nil {
			errs = append(errs, fmt.Errorf("removing what saving a config wrote: %w", err))
		}
	}
	if len(errs) == 1 {
		return cause
	}
	return errors.Join(errs...)
}

// forget adds lines to the sandbox's order record, as read into inv,
// and drops its cache files, in one commit; an unreadable record is
// replaced.
func (st *sandboxStore) forget(ctx context.Context, id string, inv *inventory, lines []cache.Attachment, files []ledger.Entry, log *logrus.Entry) error {
	old := inv.record
	if inv.recordErr != nil {
		log.WithError(inv.recordErr).Warn("Replacing an unreadable attachment order record")
		old = nil
	}
	next, changed := nextRecord(id, old, recordChange{forgotten: lines}, st.heal, time.Now(), log)
	keep := inv.recordErr == nil && !changed
	return st.commit(ctx, id, ledger.Change{Old: old, Next: next, Keep: keep, Drop: files}, log)
}

// settlement is what the DELs of one operation on a sandbox (a
// teardown, a rollback, GC or a heal retry) leave to [sandboxStore.settle].
type settlement struct {
	// recorded and rerr are the record as read under the sandbox's lock
	// before the DELs, and why it could not be read.
	recorded []cache.Attachment
	rerr     error
	// never are attachments a setup recorded but never added.
	never    []NetAttachment
	plans    []*plan
	outcomes []Outcome
	// strays asks to remove what a setup killed before it wrote its
	// record left, once no DEL failed: the caller found no record.
	strays bool
}

// settle commits sandbox id's next state after DELs (see [settlement]
// and [recordChange] for what each outcome does): the record, and the
// cache entries of the attachments deleted or gone that libcni did not
// remove itself. A failed attachment that only its cache entry knew is
// added with the config its DEL ran with, saved, so that it can be
// deleted when the entry is removed by hand. An unreadable record cannot
// guide anything: it goes when no DEL failed, and is replaced by the
// failed attachments otherwise. A commit that fails leaves the record
// and the entries as they were, and returns a *[RecordError]: the
// attachments of the DELs go to the healer (see [unsettledSet]), which
// runs them again and commits once the cache dir can be written.
func (st *sandboxStore) settle(ctx context.Context, id string, s settlement, log *logrus.Entry) error {
	next, changed := nextRecord(id, s.recorded, recordChange{
		never: s.never, outcomes: s.outcomes,
		lineFor: func(o Outcome) (cache.Attachment, bool) { return st.lineFor(s.plans, o, log) },
	}, st.heal, time.Now(), log)
	failed := slices.ContainsFunc(s.outcomes, Outcome.Failure)
	ch := ledger.Change{
		Old: s.recorded, Next: next, Keep: s.rerr == nil && !changed,
		Drop: entriesToDrop(s.plans, s.outcomes), Strays: s.strays && !failed,
	}
	if ch.Keep && len(ch.Drop) == 0 && !ch.Strays {
		return nil
	}
	err := st.commit(ctx, id, ch, log)
	if err == nil {
		return nil
	}
	atts := make([]NetAttachment, 0, len(s.plans)+len(s.never))
	for _, p := range s.plans {
		atts = append(atts, p.NetAttachment)
	}
	atts = append(atts, s.never...)
	if st.unsettled != nil {
		st.unsettled(id, atts)
	}
	log.WithError(err).Warn("Cannot update the attachment order record after the DELs; " +
		"running them again and recording their outcome in the background")
	return &RecordError{ContainerID: id, Err: err}
}

// entriesToDrop returns the cache entries that the engine removes after
// the DELs of plans (see [plan.cacheEntry]): the file of each attachment
// deleted, or gone, that libcni did not remove itself. libcni keeps an
// entry whose DEL answered code 3.
func entriesToDrop(plans []*plan, outcomes []Outcome) []ledger.Entry {
	var out []ledger.Entry
	for _, o := range outcomes {
		if o.Class != Deleted && o.Class != AlreadyGone {
			continue
		}
		i := slices.IndexFunc(plans, func(p *plan) bool { return p.Name == o.Network && p.Ifname == o.IfName })
		if i < 0 || plans[i].list == nil {
			continue
		}
		p := plans[i]
		switch {
		case p.cacheEntry == "" && p.file != "":
			out = append(out, ledger.Entry{Path: p.file})
		case p.cacheEntry == "" || o.Class == AlreadyGone:
			out = append(out, ledger.Entry{Network: p.Name, IfName: p.Ifname})
		}
	}
	return out
}

// lineFor builds the record line of a failed attachment that only its
// cache entry knew, saving the config its DEL ran with.
func (st *sandboxStore) lineFor(plans []*plan, o Outcome, log *logrus.Entry) (cache.Attachment, bool) {
	line := cache.Attachment{Network: o.Network, IfName: o.IfName}
	i := slices.IndexFunc(plans, func(p *plan) bool { return p.Name == o.Network && p.Ifname == o.IfName })
	if i < 0 || plans[i].list == nil {
		return line, false // nothing to delete it with: the cache entry, if any, stays
	}
	p := plans[i]
	if p.rt != nil {
		line.NetNS = p.rt.NetNS
	}
	saved, err := st.led.SaveConfig(p.id, p.list.Bytes)
	if err != nil {
		log.WithFields(logrus.Fields{"network": p.Name, "ifname": p.Ifname, "verb": "DEL"}).WithError(err).
			Warn("Cannot save the config of a failed attachment")
	} else {
		line.Config = saved.Digest
	}
	return line, true
}

// pruneStaleRecord settles a stale container after GC's DELs, from
// the record as read under the container's lock (see [sandboxStore.settle]).
// An unreadable record goes once no cache entry of the container is
// left, readable or corrupt.
func (st *sandboxStore) pruneStaleRecord(ctx context.Context, id string, s settlement, log *logrus.Entry) {
	// A commit that fails is finished by the healer (see settle); GC's
	// outcomes are the DELs'.
	if s.rerr == nil || slices.ContainsFunc(s.outcomes, Outcome.Failure) {
		_ = st.settle(ctx, id, s, log)
		return
	}
	_ = st.settle(ctx, id, settlement{recorded: s.recorded, plans: s.plans, outcomes: s.outcomes}, log) // drops the entries alone
	left, err := st.hasCacheFiles(id)
	if err != nil {
		log.WithError(err).Warn("Cannot list the cache entries of a container; keeping its unreadable attachment order record")
		return
	}
	if left {
		return
	}
	log.WithError(s.rerr).Warn("Removing an unreadable attachment order record; no cache entry of its container is left")
	if err := st.commit(ctx, id, ledger.Change{}, log); err != nil {
		log.WithError(err).Warn("Cannot remove attachment order record")
	}
}

// readRecord reads sandbox id's order record, for a caller that holds
// its lock and needs the record as it is now (GC, before it prunes).
func (st *sandboxStore) readRecord(id string) ([]cache.Attachment, error) {
	return st.led.ReadRecord(id)
}

// records holds every attachment order record, read by one scan (see
// [ledger.Ledger.ScanRecords]).
type records = ledger.Records

// scanRecords reads every order record and lists the saved configs with
// them: the one scan behind [Manager.PendingTeardowns], the healer's
// resume at start, and GC.
func (st *sandboxStore) scanRecords() (*records, error) { return st.led.ScanRecords() }

// PendingTeardown is an attachment whose DEL failed and that the manager
// retries in the background (see [HealPolicy]), or gave up retrying.
type PendingTeardown struct {
	ContainerID string
	Network     string
	IfName      string
	// Attempts counts the failed DELs so far.
	Attempts int
	// Since is when the first DEL failed; NextAttempt when the next retry
	// is due (zero once GaveUp).
	Since, NextAttempt time.Time
	LastError          string
	// GaveUp is set once the horizon passed: no more retries; the
	// attachment stays recorded for GC.
	GaveUp bool
}

func (st *sandboxStore) pendingTeardowns() ([]PendingTeardown, error) {
	recs, err := st.scanRecords()
	if err != nil {
		return nil, err
	}
	var out []PendingTeardown
	for _, id := range recs.IDs {
		for _, a := range recs.ByID[id] {
			if p, ok := pendingOf(id, a); ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// pendingOf returns the DEL retry, pending or given up, that line a of
// sandbox id's order record holds, if any.
func pendingOf(id string, a cache.Attachment) (PendingTeardown, bool) {
	h := a.Heal
	if h == nil {
		return PendingTeardown{}, false
	}
	return PendingTeardown{
		ContainerID: id, Network: a.Network, IfName: a.IfName,
		Attempts: h.Attempts, Since: h.Since, NextAttempt: h.Next, LastError: h.LastError, GaveUp: h.GaveUp,
	}, true
}

// retriesMarked is when a record last came to leave a DEL retry pending,
// in any engine or process (see [ledger.Ledger.RetriesMarked]).
func (st *sandboxStore) retriesMarked() time.Time { return st.led.RetriesMarked() }

// pendingRetries returns, by sandbox, what its order record leaves for
// healing: what the healer resumes at start. Unreadable records are left
// to GC, which reports them.
func (st *sandboxStore) pendingRetries(log *logrus.Entry) map[string]healState {
	recs, err := st.scanRecords()
	if err != nil {
		log.WithError(err).Warn("Cannot list attachment order records; pending DEL retries resume at the next teardown or GC")
		return nil
	}
	out := map[string]healState{}
	for id, record := range recs.ByID {
		if hs := pendingHeal(record); !hs.due.IsZero() {
			out[id] = hs
		}
	}
	return out
}

// pendingHeal returns what a record leaves for healing: when its first
// pending retry is due and when the earliest of its failures was; a zero
// due for none.
func pendingHeal(record []cache.Attachment) healState {
	var st healState
	for _, a := range record {
		if h := a.Heal; h != nil && !h.GaveUp {
			if st.due.IsZero() || h.Next.Before(st.due) {
				st.due = h.Next
			}
			if st.since.IsZero() || h.Since.Before(st.since) {
				st.since = h.Since
			}
		}
	}
	return st
}

// What follows computes a sandbox's next order record from the one read
// and what happened since (a [recordChange]); the code above writes it.

// recordChange is what happened to a sandbox's attachments since its
// order record was read; [nextRecord] applies it.
type recordChange struct {
	// added are the lines of a setup's attachments, in ADD order. They
	// lead the record; the old lines they do not name follow, so that
	// teardown and GC still delete them, with their pending DEL retries
	// cancelled: the runtime is creating the sandbox again.
	added []cache.Attachment
	// forgotten are lines of attachments whose cache files are dropped
	// (see [Manager.ForgetPodCache]); each the record lacks is appended.
	forgotten []cache.Attachment
	// never are attachments a setup recorded but never added: their
	// lines go.
	never []NetAttachment
	// outcomes are DELs' outcomes: the line of an attachment deleted, or
	// gone, goes; a failed one stays, or is added with lineFor when only
	// its cache entry knew it, and its retry state is updated.
	outcomes []Outcome
	lineFor  func(Outcome) (cache.Attachment, bool)
}

// nextRecord returns sandbox id's order record after change, from the
// record as read (old), and whether it differs from old. Setups always
// write their record, so change.added counts as a change.
func nextRecord(id string, old []cache.Attachment, change recordChange, pol HealPolicy, now time.Time, log *logrus.Entry,
) ([]cache.Attachment, bool) {
	next, changed := keptLines(old, change, log)
	for _, a := range change.forgotten {
		if findLine(next, a.Network, a.IfName) == nil {
			next = append(next, a)
			changed = true
		}
	}
	for _, o := range change.outcomes {
		if o.ContainerID != id || o.Network == "" {
			continue
		}
		var c bool
		if next, c = applyOutcome(next, o, change.lineFor, pol, now, log); c {
			changed = true
		}
	}
	return next, changed
}

// keptLines returns change.added followed by the lines of old that stay:
// those that neither change.added nor change.never names, with their
// retries cancelled after a setup.
func keptLines(old []cache.Attachment, change recordChange, log *logrus.Entry) ([]cache.Attachment, bool) {
	next := slices.Clone(change.added)
	changed := len(change.added) > 0
	setup := change.added != nil
	for _, a := range old {
		if setup && findLine(next, a.Network, a.IfName) != nil ||
			slices.Contains(change.never, NetAttachment{Name: a.Network, Ifname: a.IfName}) {
			changed = true
			continue
		}
		if setup && a.Heal != nil {
			log.WithFields(logrus.Fields{"network": a.Network, "ifname": a.IfName}).
				Info("Setup of the sandbox cancels a pending DEL retry; the attachment stays recorded for teardown and GC")
			a.Heal = nil
		}
		next = append(next, a)
	}
	return next, changed
}

// applyOutcome applies one DEL's outcome to next (see [recordChange]) and
// reports whether it changed it.
func applyOutcome(next []cache.Attachment, o Outcome, lineFor func(Outcome) (cache.Attachment, bool),
	pol HealPolicy, now time.Time, log *logrus.Entry,
) ([]cache.Attachment, bool) {
	i := slices.IndexFunc(next, func(a cache.Attachment) bool { return a.Network == o.Network && a.IfName == o.IfName })
	switch {
	case (o.Class == Deleted || o.Class == AlreadyGone) && i >= 0:
		return slices.Delete(next, i, i+1), true
	case o.Failure():
		if i < 0 {
			line, ok := lineFor(o)
			if !ok {
				return next, false
			}
			next = append(next, line)
			i = len(next) - 1
		}
		markFailed(&next[i], o, pol, now, log)
		return next, true
	}
	return next, false
}
