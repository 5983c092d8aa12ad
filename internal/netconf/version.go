package netconf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

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
	// versionCutGrace bounds how long [Loader.Shutdown] waits for the
	// VERSION calls it cut short to return. The default executor kills a
	// plugin's process group as its context ends, so they return at once;
	// one that ignores its context is not waited for beyond this.
	versionCutGrace = 300 * time.Millisecond
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

	// Guarded by versionCache.mu. abandoned is set when a load stopped
	// waiting for the call, so that its completion requests a load. cut
	// is set when [Loader.Shutdown] cut the call short: its answer, if
	// any, is dropped, and it requests nothing.
	abandoned bool
	cut       bool
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
// no caller that gives up cancels it, so that a caller's deadline never
// makes a call fail for everyone. Only [Loader.Shutdown] does (see
// versionCache.cutShort), and a call it cuts short is forgotten, not
// remembered as a failure. At most maxVersionCalls run at once.
type versionCache struct {
	exec     invoke.Exec
	timeout  time.Duration
	slots    chan struct{} // one token per running call
	onAnswer func()        // called when an abandoned call completes

	// mu guards the fields below and every entry's abandoned and cut;
	// never held while a plugin runs.
	mu       sync.Mutex
	entries  map[string]*versionEntry
	inflight map[*versionEntry]context.CancelCauseFunc // calls started and not yet resolved
	// cutting counts the Shutdowns that are cutting calls short; while
	// one is, get starts no call. cuts is closed while cutting > 0, and
	// replaced by an open one when the last Shutdown is done.
	cutting int
	cuts    chan struct{}
}

// errVersionCut is the cause with which [Loader.Shutdown] cancels the
// VERSION calls in flight. A call cut short is never resolved with a
// failure that a load would use: validate reports its network as pending.
var errVersionCut = errors.New("ocicni: plugin VERSION call cut short by shutdown")

func newVersionCache(exec invoke.Exec, timeout time.Duration, onAnswer func()) *versionCache {
	return &versionCache{
		exec:     exec,
		timeout:  timeout,
		slots:    make(chan struct{}, maxVersionCalls),
		onAnswer: onAnswer,
		entries:  make(map[string]*versionEntry),
		inflight: make(map[*versionEntry]context.CancelCauseFunc),
		cuts:     make(chan struct{}),
	}
}

// get returns the VERSION call for the binary at path: the remembered one
// while the binary is unchanged, otherwise a new one, started now. It
// never blocks on the plugin. While a Shutdown cuts calls short, a new
// call is returned already cut, and no plugin runs.
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
	if c.cutting > 0 {
		e.cut, e.err = true, errVersionCut
		close(e.done)
		return e
	}
	if statErr == nil {
		// A faked exec's paths may not exist: those are not remembered.
		e.stamp = stampOf(fi)
		c.entries[path] = e
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	c.inflight[e] = cancel
	go c.call(ctx, e)
	return e
}

// call runs VERSION for e under ctx, which only a cut cancels, and
// resolves it.
func (c *versionCache) call(ctx context.Context, e *versionEntry) {
	var info version.PluginInfo
	var err error
	select {
	case c.slots <- struct{}{}:
		tctx, cancel := context.WithTimeout(ctx, c.timeout)
		info, err = guard.Value("libcni VERSION", "", func() (version.PluginInfo, error) {
			return invoke.GetVersionInfo(tctx, e.path, c.exec)
		})
		cancel()
		<-c.slots
	case <-ctx.Done(): // cut short before its turn: no plugin ran
		err = context.Cause(ctx)
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrVersionFailed, err)
	}

	c.mu.Lock()
	release := c.inflight[e]
	delete(c.inflight, e)
	release(nil) // frees the context; a cut has cancelled it already
	e.info, e.err = info, err
	close(e.done)
	answered := e.abandoned && !e.cut
	c.mu.Unlock()
	if answered {
		c.onAnswer()
	}
}

// abandon records that a load stopped waiting for e, and reports whether
// e resolved after all (then its answer can be used right away), and, when
// it did not, whether that is because [Loader.Shutdown] cut it short: a
// call cut short has no answer to use, and none is coming.
func (c *versionCache) abandon(e *versionEntry) (answered, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.cut {
		return false, true
	}
	if e.resolved() {
		return true, false
	}
	e.abandoned = true
	return false, false
}

// cutsNow returns a channel that is closed while a Shutdown cuts calls
// short: at once if one is doing so now, else when the next one starts.
// A load or a lookup takes it before it gets its calls, so that a cut of
// any of them wakes it.
func (c *versionCache) cutsNow() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

// cutShort cancels every call in flight (their plugins are killed through
// the context), forgets them, so that a later load asks their binaries
// again, and starts no call until endCut. It returns the calls it cut, for
// waitCut.
func (c *versionCache) cutShort() []*versionEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cutting == 0 {
		close(c.cuts)
	}
	c.cutting++
	cut := make([]*versionEntry, 0, len(c.inflight))
	for e, cancel := range c.inflight {
		e.cut = true
		if c.entries[e.path] == e {
			delete(c.entries, e.path)
		}
		cancel(errVersionCut)
		cut = append(cut, e)
	}
	return cut
}

// endCut ends what cutShort began: calls start again.
func (c *versionCache) endCut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutting--
	if c.cutting == 0 {
		c.cuts = make(chan struct{})
	}
}

// waitCut waits until the calls that cutShort returned have returned, or
// grace has passed. A call whose executor ignores its context runs on
// past it: its answer is dropped when it comes.
func waitCut(calls []*versionEntry, grace time.Duration) {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for _, e := range calls {
		select {
		case <-e.done:
		case <-timer.C:
			return
		}
	}
}

// waitVersions waits until every entry is resolved, wait has passed, cut
// is closed (a Shutdown cut the calls short), or ctx is done; it returns
// ctx's error in the last case.
func waitVersions(ctx context.Context, entries []*versionEntry, wait time.Duration, cut <-chan struct{}) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, e := range entries {
		select {
		case <-e.done:
		case <-timer.C:
			return nil
		case <-cut:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
