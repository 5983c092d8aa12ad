package ocicni

import (
	"context"
	"sync"
)

// reloader runs the reloads that pod operations and VERSION answers ask
// for, one at a time, under no caller's context (nor cancelled by
// Shutdown), so that a caller that gives up waiting does not cut a reload
// short for everyone. Requests that
// arrive while a reload runs share the one after it.
type reloader struct {
	mu      sync.Mutex    // guards the fields below; taken after the loader's lock
	pending chan struct{} // closed when the next reload is done; nil when none is asked for
	running bool          // a reload goroutine is running
	changed chan struct{} // closed and replaced whenever a set is published
}

// requestReload asks for a reload that reads the conf dir after this
// call, and returns a channel that is closed when that reload is done
// (published, found nothing new, or failed).
func (m *Manager) requestReload() <-chan struct{} {
	r := &m.reloads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = make(chan struct{})
	}
	if !r.running {
		r.running = true
		m.reloading.add()
		go m.runReloads()
	}
	return r.pending
}

func (m *Manager) runReloads() {
	defer m.reloading.done()
	r := &m.reloads
	for {
		r.mu.Lock()
		done := r.pending
		r.pending = nil
		if done == nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		m.reload(context.Background()) // not the caller's, nor cancelled by Shutdown
		close(done)
	}
}

// next returns a channel that is closed by the next publication.
func (r *reloader) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// broadcast wakes the waiters for the next publication.
func (r *reloader) broadcast() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.changed)
	r.changed = make(chan struct{})
}
