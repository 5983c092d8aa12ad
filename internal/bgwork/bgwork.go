package bgwork

import "sync"

// Tracker counts background work in flight. Call [Tracker.Add] before the
// goroutine starts and [Tracker.Done] when it ends; [Tracker.Wait]
// returns once none is in flight. The zero value is ready to use; a
// Tracker must not be copied after first use.
type Tracker struct {
	mu   sync.Mutex // guards n and idle
	n    int
	idle *sync.Cond // broadcast when n drops to zero; made on first use
}

// Add counts one piece of work that has started.
func (t *Tracker) Add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

// Done counts one piece of work that has ended. It panics when no work is
// in flight, as a sync.WaitGroup does.
func (t *Tracker) Done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		panic("bgwork: Done without Add")
	}
	t.n--
	if t.n == 0 && t.idle != nil {
		t.idle.Broadcast()
	}
}

// Wait returns once no work is in flight, including work that starts
// while it waits.
func (t *Tracker) Wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = sync.NewCond(&t.mu)
	}
	for t.n > 0 {
		t.idle.Wait()
	}
}
