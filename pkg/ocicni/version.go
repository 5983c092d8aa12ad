package ocicni

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

const (
	// versionTimeout bounds one plugin VERSION call. A call that times out
	// is a failure like any other: it is remembered until the binary
	// changes.
	versionTimeout = 10 * time.Second
	// versionWait is how long a load waits for VERSION answers before it
	// publishes without the networks still waiting for one. Those are
	// loaded by the reload that follows their answer.
	versionWait = time.Second
	// maxVersionCalls bounds the VERSION calls that run at once.
	maxVersionCalls = 4
)

// versionEntry is one VERSION call of a plugin binary: its answer or its
// failure, and the stamp of the binary that gave it.
type versionEntry struct {
	path  string
	stamp fileStamp
	done  chan struct{} // closed once info and err are set

	// Set before done is closed; read only after it is.
	info version.PluginInfo
	err  error

	// abandoned is set when a load stopped waiting for the call, so that
	// its completion triggers a reload; guarded by versionCache.mu.
	abandoned bool
}

func (e *versionEntry) resolved() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// versionCache runs plugin VERSION calls and remembers their answers and
// their failures per binary path and stamp (size, times, inode), so a
// binary is asked again only once it changed. Calls run in their own
// goroutines under a context of their own, bounded by the VERSION
// timeout and never a caller's, so a caller that gives up does not make a
// call fail for everyone; at most
// maxVersionCalls run at once.
type versionCache struct {
	base     context.Context // the manager's; cancelled by Shutdown
	exec     invoke.Exec
	timeout  time.Duration
	slots    chan struct{} // one token per running call
	onAnswer func()        // called when an abandoned call completes

	mu      sync.Mutex // guards entries, closed and every entry's abandoned; never held while a plugin runs
	entries map[string]*versionEntry
	closed  bool
	running *inflight // calls in flight
}

func newVersionCache(base context.Context, exec invoke.Exec, timeout time.Duration, onAnswer func()) *versionCache {
	return &versionCache{
		base:     base,
		exec:     exec,
		timeout:  timeout,
		slots:    make(chan struct{}, maxVersionCalls),
		onAnswer: onAnswer,
		entries:  make(map[string]*versionEntry),
		running:  newInflight(),
	}
}

// get returns the VERSION call for the binary at path: the remembered one
// while the binary is unchanged, otherwise a new one, started now. It
// never blocks on the plugin.
func (c *versionCache) get(path string) *versionEntry {
	fi, statErr := os.Stat(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if statErr == nil {
		if e, ok := c.entries[path]; ok && e.stamp == stampOf(fi) {
			return e
		}
	}
	e := &versionEntry{path: path, done: make(chan struct{})}
	if c.closed {
		e.err = ErrShutdown
		close(e.done)
		return e
	}
	if statErr == nil {
		// A faked exec's paths may not exist: those are not remembered.
		e.stamp = stampOf(fi)
		c.entries[path] = e
	}
	c.running.add()
	go c.call(e)
	return e
}

// call runs VERSION for e and resolves it.
func (c *versionCache) call(e *versionEntry) {
	defer c.running.done()
	var info version.PluginInfo
	var err error
	select {
	case c.slots <- struct{}{}:
		ctx, cancel := context.WithTimeout(c.base, c.timeout)
		info, err = invoke.GetVersionInfo(ctx, e.path, c.exec)
		cancel()
		<-c.slots
	case <-c.base.Done():
		err = c.base.Err()
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrVersionFailed, err)
	}

	c.mu.Lock()
	e.info, e.err = info, err
	close(e.done)
	if err != nil && c.base.Err() != nil && c.entries[e.path] == e {
		delete(c.entries, e.path) // cut short by Shutdown: not the binary's fault
	}
	abandoned := e.abandoned
	c.mu.Unlock()
	if abandoned {
		c.onAnswer()
	}
}

// abandon records that a load stopped waiting for e, and reports whether
// e resolved after all (then its answer can be used right away).
func (c *versionCache) abandon(e *versionEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.resolved() {
		return true
	}
	e.abandoned = true
	return false
}

// close refuses new calls and waits for the running ones. Calls are bound
// by the timeout, so this returns once the exec gives up on its plugin.
func (c *versionCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wait()
}

// wait waits for the calls running now and for any that start meanwhile.
func (c *versionCache) wait() { c.running.wait() }

// waitVersions waits until every entry is resolved, wait has passed, or
// ctx is done; it returns ctx's error in the last case.
func waitVersions(ctx context.Context, entries []*versionEntry, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, e := range entries {
		select {
		case <-e.done:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
