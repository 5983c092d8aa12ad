// Package netns runs code inside Linux network namespaces and performs the
// handful of link operations the manager and its tests need, without the
// ip or nsenter binaries and without a netlink library.
//
// # Threads
//
// A network namespace belongs to an OS thread, not to a goroutine. [Do] runs
// its function on a fresh goroutine locked to its thread. When the thread
// cannot be returned to its original namespace, the goroutine exits while
// still locked, and the Go runtime discards the thread, so a namespace never
// leaks into unrelated goroutines.
//
// # Lifecycle
//
// [New] creates a namespace pinned by a bind mount under [RunDir], as
// "ip netns add" does; [Remove] unmounts and deletes it. Namespaces made by
// a runtime are only entered, never created or removed, by the library.
package netns
