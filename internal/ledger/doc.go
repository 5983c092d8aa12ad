// Package ledger is the one store of what the engine knows of a node's
// sandboxes, below the engine: the order records (with their retry
// state), the configs saved with them, and libcni's result-cache entries
// as the engine sees them, all under one cache dir that every engine and
// process of the node may share. It is the engine's only door to package
// cache, and it holds the locks that make one sandbox's changes one at a
// time across engines and processes.
//
// # Reading
//
// [Ledger.Read] returns all that is known of one sandbox: its record,
// its readable cache entries and its corrupt files; [Ledger.ReadNamed]
// the same for named attachments only. [Ledger.Scan] reads the whole
// node once (one listing of the results, then every record and saved
// config), for GC, the pending teardowns and the engine's start.
// Nothing here is locked: a caller that acts on what it read holds the
// sandbox's lock ([Ledger.LockSandbox]) while it reads and acts.
//
// # Writing
//
// [Ledger.Commit] makes one [Change] to a sandbox, whole or not at all:
// it drops the cache entries whose attachments are gone, writes the next
// record in place of the one the caller read (an empty one removes it),
// durably, and then releases the saved configs that only the old record
// used and the strays of a setup killed before it wrote its record. The
// record is the commit point: the dropped entries wait in
// <cache dir>/ocicni/aside/<sandbox> with the record being written, and
// go once it is in place. A commit that a crash cut short is finished
// (the record on disk is the one it wrote) or undone (it is not) by the
// next holder of the sandbox's lock, or by [Ledger.Recover] at
// start and before GC. The config methods save and read the configs
// records link; a setup saves its configs before its record's commit,
// and takes them back ([Ledger.UndoSaveConfig]) when the commit fails.
//
// # Locks
//
// A sandbox's lock file, and the node gate, are the [locks.Files] under
// <cache dir>/ocicni/locks: [Ledger.LockSandbox] takes the first,
// [Ledger.RLockNode] and [Ledger.LockNode] the second. A released
// sandbox lock's file goes with the sandbox's record
// ([SandboxLock.Release]); [Ledger.SweepLocks] removes those that a
// holder which died before it wrote a record left. Which locks come first, and the in-process
// locks in front of these, are the engine's (pkg/ocicni's package doc,
// "Locking").
package ledger
