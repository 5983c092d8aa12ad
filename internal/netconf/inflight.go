package netconf

import "sync"

// inflight counts background work (VERSION calls, requested loads) that
// [Loader.Shutdown] waits for. Unlike a sync.WaitGroup, work may start
// while another goroutine waits, since the loader keeps serving after
// Shutdown. (Package ocicni has the same counter for its own background
// work.)
type inflight struct {
	mu   sync.Mutex // guards n
	n    int
	idle *sync.Cond // signalled when n drops to zero
}

func newInflight() *inflight {
	f := &inflight{}
	f.idle = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		f.idle.Broadcast()
	}
	f.mu.Unlock()
}

// wait returns once no work is in flight.
func (f *inflight) wait() {
	f.mu.Lock()
	for f.n > 0 {
		f.idle.Wait()
	}
	f.mu.Unlock()
}
