package ocicni

import (
	"context"
	"sync"
)

// withGCHold lets h hold GC's DEL workers between sandboxes (see gcHold).
func withGCHold(h gcHold) Option {
	return func(o *options) error {
		o.gcHold = h
		return nil
	}
}

// benchGCHold is the gcHold of BenchmarkGC10000: hold stops GC's DEL
// workers before their next sandbox and returns once none is deleting or
// resting; release lets them go on. A held worker waits whatever its ctx
// says: the benchmark's GC runs without a deadline.
type benchGCHold struct {
	mu     sync.Mutex
	cond   *sync.Cond // signalled when held or active changes
	held   bool
	active int // workers between enter and leave
}

func newBenchGCHold() *benchGCHold {
	h := &benchGCHold{}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *benchGCHold) enter(context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held {
		h.cond.Wait()
	}
	h.active++
}

func (h *benchGCHold) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	h.cond.Broadcast()
}

// hold stops workers from starting a sandbox and waits until those that
// started one have finished it, its rest included.
func (h *benchGCHold) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = true
	for h.active > 0 {
		h.cond.Wait()
	}
}

func (h *benchGCHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	h.cond.Broadcast()
}
