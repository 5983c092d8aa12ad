// Package bgwork counts background work that a Shutdown waits for: the
// manager's rollbacks and healing retries, the config loader's requested
// loads. Each runs in a goroutine of its own that outlives the call that
// started it, and Shutdown returns only once none is left. (The loader's
// VERSION calls are not counted here: Shutdown cuts them short, and
// waits for them only for a grace.)
//
// A [Tracker] is a sync.WaitGroup that allows new work while another
// goroutine waits: the manager and the loader keep serving after
// Shutdown, so a call that arrives meanwhile may start work, and
// [Tracker.Wait] waits for that too. A WaitGroup forbids an Add from
// zero that races with a Wait.
//
// [Sleep] is the wait of background work that must end with its context:
// GC's rests, and the executor's retry of a busy plugin binary.
package bgwork
