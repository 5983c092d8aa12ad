// Package locks holds the two lock primitives the manager serializes its
// work with. Both wait with a context: a waiter whose context ends gives
// up, holding nothing, and gets the context's error. Neither knows what
// it guards; which locks the manager takes, and in which order, is
// written in pkg/ocicni's package doc (Locking).
//
// # Keyed locks
//
// A [Keyed] is a set of mutexes, one per key (a sandbox ID, for the
// manager), made on first use and dropped when nobody holds or waits for
// it: holders of different keys never wait for each other, and the set
// holds only the keys in use. [Keyed.Lock] returns the unlock function
// of the key's lock. A key's lock is not reentrant, and waiters are not
// served in any promised order.
//
// # The gate
//
// A [Gate] is a reader/writer lock that prefers readers, within bounds
// set by its [Patience]:
//   - Readers ([Gate.RLock]) share the gate, and wait only while a writer
//     holds it or a waiting writer holds new readers back.
//   - A writer ([Gate.Lock]) first waits for a moment when no reader
//     holds the gate, without holding anyone back. When none comes within
//     Patience.Idle, it holds back new readers for at most Patience.Hold
//     while the readers in flight finish, then lets the held-back readers
//     in and waits for an idle moment again, and so on.
//   - So a reader waits at most Patience.Hold for a waiting writer, never
//     for the other readers in flight (a reader that hangs holds nobody
//     back for longer), and a writer still gets in when readers overlap
//     without a pause.
//   - Writers hold the gate one at a time. A writer whose context has
//     ended, or ends while it waits, leaves the gate as it found it.
//
// [Gate.State] reports who holds and waits for the gate, for tests and
// debugging.
package locks
