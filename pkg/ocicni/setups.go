package ocicni

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// setupTracker knows which sandboxes are being set up, so that a GC, which
// plans without excluding pod operations, leaves them alone (see
// [Manager.GC]). A setup registers with [setupTracker.begin] once it holds
// its sandbox's lock, before it touches anything, and stays registered
// until it releases that lock. A GC opens a [setupWatch] before it reads
// the cache: the watch holds every sandbox whose setup was in flight then
// or began later, with the attachments each setup asked for.
//
// Its mutex is a leaf: it is never held while waiting for another lock or
// while a plugin runs.
type setupTracker struct {
	mu        sync.Mutex                 // guards the fields below
	active    map[string][]NetAttachment // setups in flight, by sandbox ID
	watches   map[*setupWatch]struct{}   // open watches
	lastBegin time.Time                  // when the last setup began
}

// setupWatch is one GC's view of the setups that overlapped it.
type setupWatch struct {
	t     *setupTracker
	began time.Time                  // when the watch opened: another engine's work since then is the GC's to leave alone
	seen  map[string][]NetAttachment // guarded by t.mu
}

func newSetupTracker() *setupTracker {
	return &setupTracker{active: map[string][]NetAttachment{}, watches: map[*setupWatch]struct{}{}}
}

// begin registers the setup of sandbox id, which asks for atts, and returns
// release wrapped so that it also ends the registration. The caller holds
// the sandbox's lock, so at most one setup of id is registered at a time.
func (t *setupTracker) begin(id string, atts []NetAttachment, release func()) func() {
	t.mu.Lock()
	t.active[id] = atts
	t.lastBegin = time.Now()
	for w := range t.watches {
		w.seen[id] = append(w.seen[id], atts...)
	}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.active, id)
		t.mu.Unlock()
		release()
	}
}

// busy reports whether the node is setting pods up: a setup is in flight,
// or one began within window.
func (t *setupTracker) busy(window time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.active) > 0 || (!t.lastBegin.IsZero() && time.Since(t.lastBegin) < window)
}

// watch opens a watch that starts with the setups in flight now. The
// caller must stop it.
func (t *setupTracker) watch() *setupWatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := &setupWatch{t: t, began: time.Now(), seen: make(map[string][]NetAttachment, len(t.active))}
	for id, atts := range t.active {
		w.seen[id] = slices.Clone(atts)
	}
	t.watches[w] = struct{}{}
	return w
}

// stop closes the watch. Calling it twice is fine.
func (w *setupWatch) stop() {
	w.t.mu.Lock()
	delete(w.t.watches, w)
	w.t.mu.Unlock()
}

// touched reports whether a setup of id was in flight when the watch
// opened or began since.
func (w *setupWatch) touched(id string) bool {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	_, ok := w.seen[id]
	return ok
}

// attachments returns a copy of what the watch saw: the attachments each
// overlapping setup asked for, by sandbox ID.
func (w *setupWatch) attachments() map[string][]NetAttachment {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	out := maps.Clone(w.seen)
	for id, atts := range out {
		out[id] = slices.Clone(atts)
	}
	return out
}

// ids returns the sandbox IDs the watch saw so far, sorted.
func (w *setupWatch) ids() []string {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return slices.Sorted(maps.Keys(w.seen))
}
