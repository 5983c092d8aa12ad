package ocicni

import (
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// This file computes a sandbox's next order record from the one read and
// what happened since (a [recordChange]); record.go writes it.

// maxLastErrorLen bounds the error message a record keeps for operators.
const maxLastErrorLen = 1024

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

// markFailed updates the heal state of a record line after a failed DEL,
// on a copy: the old record's lines are never changed. It does so with
// healing off too: the state then tells operators
// ([Manager.PendingTeardowns]) and a manager started later with healing
// on, which resumes the retries.
func markFailed(a *cache.Attachment, o Outcome, pol HealPolicy, now time.Time, log *logrus.Entry) {
	h := &cache.Heal{Since: now}
	if a.Heal != nil {
		*h = *a.Heal
	}
	a.Heal = h
	h.Attempts++
	if o.Err != nil {
		h.LastError = truncate(o.Err.Error(), maxLastErrorLen)
	}
	if !h.GaveUp && pol.failed(h, now) {
		log.WithFields(logrus.Fields{
			"network": a.Network, "ifname": a.IfName, "attempts": h.Attempts, "since": h.Since,
		}).WithError(o.Err).Warn("Giving up retrying the DEL of an attachment; it stays recorded for GC")
	}
}
