package netconf

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
)

// requests runs the loads that lookups and VERSION answers request, one
// at a time, in a goroutine of their own and under context.Background():
// no caller's context, so that a caller that gives up waiting does not cut
// a load short for everyone, and not cancelled by [Loader.Shutdown], which
// waits for them (they stop waiting for VERSION answers when it cuts the
// calls short). Requests that arrive while a load runs share the one
// after it.
type requests struct {
	mu      sync.Mutex     // guards the fields below; a leaf
	pending chan struct{}  // closed when the next requested load is done; nil when none is requested
	running bool           // a goroutine serves the requests
	active  bgwork.Tracker // that goroutine
}

// RequestLoad requests a load that reads the conf dir after this call,
// and returns a channel that is closed when that load is done (published,
// found nothing new, or failed; a failure is logged). It never waits.
func (l *Loader) RequestLoad() <-chan struct{} {
	r := &l.reqs
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = make(chan struct{})
	}
	if !r.running {
		r.running = true
		r.active.Add()
		go l.serveRequests()
	}
	return r.pending
}

// serveRequests runs requested loads until none is pending.
func (l *Loader) serveRequests() {
	r := &l.reqs
	defer r.active.Done()
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
		l.loadOrLog(context.Background(), false) // see requests: no caller's context
		close(done)
	}
}

// Lookup finds network name in set. When it is missing, Lookup requests a
// load, in case a file arrived that the watcher has not reported yet (or
// there is no watcher), and waits for it; while the network waits only
// for a plugin's VERSION answer, it also waits for the load that follows
// the answer. The load runs under no caller's context; ctx bounds only
// this caller's wait. Once [Loader.Shutdown] cuts the VERSION calls
// short, no answer is coming: Lookup waits for the load it requested,
// which stops waiting for them too, and no longer. It returns the network
// and the set it was found in, or the set published last and an error
// that unwraps to a *[NetworkNotFoundError], and to ctx's error when ctx
// ended first.
func (l *Loader) Lookup(ctx context.Context, set *Set, name string) (*Network, *Set, error) {
	if n := set.byName[name]; n != nil {
		return n, set, nil
	}
	cut := l.versions.cutsNow() // before the requested load gets its calls
	wait := l.RequestLoad()
	loading, cutShort := true, false
	for {
		select {
		case <-wait:
		case <-cut:
			cut, cutShort = nil, true
			if loading {
				continue // the requested load ends soon, and is worth reading
			}
		case <-ctx.Done():
			set = l.Snapshot()
			return nil, set, fmt.Errorf("%w (gave up waiting for a reload: %w)", set.NotFound(name), ctx.Err())
		}
		loading = false
		wait = l.Published() // taken before the set, so no publication is missed
		set = l.Snapshot()
		if n := set.byName[name]; n != nil {
			return n, set, nil
		}
		if cutShort || !set.pending(name) {
			return nil, set, set.NotFound(name)
		}
	}
}
