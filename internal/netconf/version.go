package netconf

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
	"github.com/seed-671fdd43/ocicni/internal/guard"
)

const (
	// DefaultVersionTimeout bounds one plugin VERSION call unless
	// [Config].VersionTimeout says otherwise. A call that times out is a
	// failure like any other: it is remembered until the binary changes.
	DefaultVersionTimeout = 10 * time.Second
	// DefaultVersionWait is how long a load waits for VERSION answers
	// before it publishes without the networks still waiting for one,
	// unless [Config].VersionWait says otherwise. Those are loaded by the
	// load that follows their answer.
	DefaultVersionWait = time.Second
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
	// its completion requests a load; guarded by versionCache.mu.
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
// binary is asked again only once it changed. Each call runs in a
// goroutine of its own under context.Background() bounded by the timeout:
// neither a caller that gives up nor [Loader.Shutdown] cancels it (Shutdown
// waits for it), so that a caller's deadline never makes a call fail for
// everyone. At most maxVersionCalls run at once.
type versionCache struct {
	exec     invoke.Exec
	timeout  time.Duration
	slots    chan struct{} // one token per running call
	onAnswer func()        // called when an abandoned call completes

	mu      sync.Mutex // guards entries and every entry's abandoned; never held while a plugin runs
	entries map[string]*versionEntry
	running bgwork.Tracker // calls in flight
}

func newVersionCache(exec invoke.Exec, timeout time.Duration, onAnswer func()) *versionCache {
	return &versionCache{
		exec:     exec,
		timeout:  timeout,
		slots:    make(chan struct{}, maxVersionCalls),
		onAnswer: onAnswer,
		entries:  make(map[string]*versionEntry),
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
	if statErr == nil {
		// A faked exec's paths may not exist: those are not remembered.
		e.stamp = stampOf(fi)
		c.entries[path] = e
	}
	c.running.Add()
	go c.call(e)
	return e
}

// call runs VERSION for e and resolves it.
func (c *versionCache) call(e *versionEntry) {
	defer c.running.Done()
	c.slots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	info, err := guard.Value("libcni VERSION", "", func() (version.PluginInfo, error) {
		return invoke.GetVersionInfo(ctx, e.path, c.exec)
	})
	cancel()
	<-c.slots
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrVersionFailed, err)
	}

	c.mu.Lock()
	e.info, e.err = info, err
	close(e.done)
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

// wait waits for the calls running now and for any that start meanwhile.
// Calls are bounded by the timeout, so it returns once the exec gives up
// on its plugin.
func (c *versionCache) wait() { c.running.Wait() }

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
