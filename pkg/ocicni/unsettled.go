package ocicni

import (
	"slices"
	"sync"
	"time"
)

// unsettledSet is, in memory, the attachments whose DELs ran but whose
// outcome could not be committed to the cache dir (a read-only or full
// file system, an I/O error): their record lines and cache entries are
// still on disk, and say the attachments are live. The healer runs their
// DELs again (DEL is idempotent) and commits, until a commit goes
// through, so that a teardown on a sick file system is finished with no
// call from the runtime once the file system is well. It lives in memory
// only: a manager that ends first leaves the record to the next one's GC.
//
// mu is a leaf lock.
type unsettledSet struct {
	mu    sync.Mutex
	atts  map[string][]NetAttachment // sandbox ID -> the attachments to settle
	tries map[string]int             // sandbox ID -> failed commits in a row
}

// add adds atts to sandbox id's, and returns how many commits of the
// sandbox failed in a row, this one included.
func (u *unsettledSet) add(id string, atts []NetAttachment) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.atts == nil {
		u.atts, u.tries = map[string][]NetAttachment{}, map[string]int{}
	}
	cur := u.atts[id]
	for _, a := range atts {
		if !slices.Contains(cur, a) {
			cur = append(cur, a)
		}
	}
	u.atts[id] = cur
	u.tries[id]++
	return u.tries[id]
}

// take returns sandbox id's attachments to settle, and forgets them; a
// retry whose commit fails again adds them back.
func (u *unsettledSet) take(id string) []NetAttachment {
	u.mu.Lock()
	defer u.mu.Unlock()
	atts := u.atts[id]
	delete(u.atts, id)
	return atts
}

// settled forgets sandbox id's failed commits: one went through.
func (u *unsettledSet) settled(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.tries, id)
}

// unsettle schedules a retry of the DELs of sandbox id's attachments
// atts, whose outcome could not be committed, after the policy's backoff
// (see [unsettledSet]). With healing off, nothing is retried: the record
// stays for GC.
func (h *healer) unsettle(id string, atts []NetAttachment) {
	if h.policy.Disabled || len(atts) == 0 {
		return
	}
	tries := h.unsettled.add(id, atts)
	now := time.Now()
	h.mu.Lock()
	if _, ok := h.since[id]; !ok {
		h.since[id] = now
	}
	h.mu.Unlock()
	h.schedule(id, now.Add(h.policy.backoff(tries)))
}

// withUnsettled returns due, the attachments of inv whose DEL retry is
// due, after those of extra (see [unsettledSet.take]) that inv still
// knows, in extra's order: the DELs of a teardown that could not commit,
// in its order.
func (inv *inventory) withUnsettled(due []*knownAttachment, extra []NetAttachment) []*knownAttachment {
	var out []*knownAttachment
	for _, a := range extra {
		if s := inv.find(a.Name, a.Ifname); s != nil {
			out = append(out, s)
		}
	}
	for _, s := range due {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
