package ocicni

// Health is what a manager can tell of the node's faults that it works
// around, read at one moment (see [Manager.Health]). Nothing in it stops
// a pod operation: it says what the manager does instead.
type Health struct {
	// LocksDegraded is set while the node-wide lock files under
	// <cache dir>/ocicni/locks cannot be used (the last lock tried failed
	// for a file system reason: a lock dir that cannot be made, a full
	// disk, an I/O error, no flock(2)). Teardowns then run their DELs
	// under this process's locks alone, and setups refuse (see the
	// package doc, Locking). A read-only cache dir whose lock files exist
	// is not degraded: flock needs no write access. LocksError is the
	// last failure.
	LocksDegraded bool
	LocksError    error
	// WatcherPolling is set while the conf dirs are polled because the
	// fsnotify watcher cannot be made or cannot watch them (no inotify
	// instance or watch left); WatcherError is why. The watcher is tried
	// again until it works, and then takes over.
	WatcherPolling bool
	WatcherError   error
}

// health returns the engine's [Health].
func (e *engine) health() Health {
	var h Health
	h.LocksDegraded, h.LocksError = e.store.fault.state()
	h.WatcherPolling, h.WatcherError = e.conf.WatchHealth()
	return h
}
