// Package locks holds the lock primitives the manager serializes its
// work with: two within a process, and lock files across processes. All
// wait with a context: a waiter whose context ends gives
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
//
// # File locks
//
// A [Files] is a directory of lock files that every process on the node
// opens: the same two locks, a key's lock and a gate, across engines and
// processes.
//   - A key's lock ([Files.Lock], [Files.TryLock]) is an exclusive
//     flock(2) on the file named by the key. flock locks belong to the
//     open file, so two holders in one process exclude each other as two
//     processes do, and a process that dies releases its locks with its
//     files: no holder is ever waited for after its death.
//   - [FileLock.Unlock] stamps the file with the holder's owner and the
//     time, so a later holder can tell who worked on the key last and
//     when ([FileLock.Stamp], [Files.Recent]); or it removes the file,
//     once the key guards nothing. A waiter that was handed the lock of a
//     removed file opens the file at the path again, so a key has one
//     lock whatever the removals.
//   - The node gate ([Files.RLockNode], [Files.LockNode]) is a shared or
//     exclusive flock on the dot file .node, with a turnstile, .turn: a
//     writer that finds readers in closes the turnstile to new readers
//     for at most its hold, and gives up with [ErrBusy] when the readers
//     in flight do not leave by then. A caller that tries again pauses
//     for [NodePause] first, so readers are held back for at most one
//     hold at a time.
//   - Waiters poll, from half a millisecond up to 20 ms apart: flock has
//     no wait that a context can end.
//
// On systems without flock(2) the lock files lock nothing, and only the
// in-process locks in front of them hold.
package locks
