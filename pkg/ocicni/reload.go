package ocicni

import "sync"

// reloader runs the reloads that pod operations and VERSION answers ask
// for, one at a time, under the manager's context, so that a caller that
// gives up waiting does not cut a reload short for everyone. Requests that
// arrive while a reload runs share the one after it.
type reloader struct {
	mu      sync.Mutex    // guards the fields below; taken after the loader's lock
	pending chan struct{} // closed when the next reload is done; nil when none is asked for
	running bool          // a reload goroutine is running
	closed  bool          // set by Shutdown: no more reloads
	changed chan struct{} // closed and replaced whenever a set is published
}

// closedChan is returned to requests that come after Shutdown.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// requestReload asks for a reload that reads the conf dir after this
// call, and returns a channel that is closed when that reload is done
// (published, found nothing new, or failed).
func (m *Manager) requestReload() <-chan struct{} {
	r := &m.reloads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return closedChan
	}
	if r.pending == nil {
		r.pending = make(chan struct{})
	}
	if !r.running {
		r.running = true
		m.wg.Add(1) // before Shutdown's Wait: close takes r.mu
		go m.runReloads()
	}
	return r.pending
}

func (m *Manager) runReloads() {
	defer m.wg.Done()
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
		m.reload(m.ctx)
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

// close refuses further requests and wakes every waiter.
func (r *reloader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	close(r.changed)
	r.changed = make(chan struct{})
}
