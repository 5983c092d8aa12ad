package netconf

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

func TestLoadLockWaitRespectsContext(t *testing.T) {
	e := newEnv(t)
	e.write(t, "10-a.conflist", conflistOf("a", "good"))
	l := e.loader(t, nil)
	require.NoError(t, l.acquire(context.Background()))
	e.write(t, "20-b.conflist", conflistOf("b", "good"))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	testenv.Within(t, loadBound, "Load", func() { err = l.Load(ctx) })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, []string{"a"}, l.Snapshot().Names())

	l.release()
	require.NoError(t, l.Load(context.Background()))
	assert.Equal(t, []string{"a", "b"}, l.Snapshot().Names())
}

func TestSlowerLoadDoesNotOverwriteANewerSet(t *testing.T) {
	e := newEnv(t)
	e.install(t, "other")
	e.install(t, "slow")
	g := e.versionGate("slow", fakecni.IgnoreContext())
	l := e.loader(t, nil)
	t.Cleanup(g.Release)

	// The first load reads the file while it names "slow", and waits for
	// its VERSION answer.
	path := e.write(t, "10-net.conflist", conflistOf("net", "slow"))
	first := make(chan error, 1)
	go func() { first <- l.Load(context.Background()) }()
	g.WaitEntered(t, 1)

	// The file changes; a second load reads it and publishes at once.
	e.write(t, "10-net.conflist", conflistOf("net", "good", "other"))
	testenv.Within(t, loadBound, "second Load", func() { require.NoError(t, l.Load(context.Background())) })
	require.Equal(t, []string{"good", "other"}, pluginTypes(l.Snapshot(), "net"))

	// The first one finishes last, and must not bring the old file back.
	published := l.Published()
	g.Release()
	select {
	case err := <-first:
		require.NoError(t, err)
	case <-time.After(loadBound):
		require.FailNow(t, "the first load did not finish")
	}
	assert.Equal(t, []string{"good", "other"}, pluginTypes(l.Snapshot(), "net"))
	assert.False(t, closed(published), "the slower load published")
	assert.Equal(t, path, l.Snapshot().Network("net").File)
}

func TestLookupRequestsALoad(t *testing.T) {
	e := newEnv(t)
	l := e.loader(t, nil) // no watcher: only a load sees new files
	before := l.Snapshot()
	e.write(t, "10-late.conflist", conflistOf("late", "good"))
	e.write(t, "20-broken.conflist", conflistOf("broken", "missing"))

	published := l.Published()
	var n *Network
	var set *Set
	var err error
	testenv.Within(t, loadBound, "Lookup", func() { n, set, err = l.Lookup(context.Background(), before, "late") })
	require.NoError(t, err)
	assert.Equal(t, "late", n.Name)
	assert.Same(t, set, l.Snapshot(), "the set it was found in")
	assert.True(t, closed(published))
	assert.Nil(t, before.Network("late"), "a published set never changes")

	// A network that the new set skips fails at once, with the reason.
	testenv.Within(t, loadBound, "Lookup", func() { _, _, err = l.Lookup(context.Background(), set, "broken") })
	require.ErrorIs(t, err, ErrNetworkNotFound)
	require.ErrorIs(t, err, ErrPluginNotFound)
	var nf *NetworkNotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, e.confDir, nf.ConfDir)
}

func TestLookupWaitEndsWithTheCallersContext(t *testing.T) {
	e := newEnv(t)
	e.install(t, "hang")
	g := e.versionGate("hang", fakecni.IgnoreContext())
	l := e.loader(t, nil)
	t.Cleanup(g.Release)
	e.write(t, "10-hang.conflist", conflistOf("hang", "hang"))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	testenv.Within(t, loadBound, "Lookup", func() { _, _, err = l.Lookup(ctx, l.Snapshot(), "hang") })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrNetworkNotFound)

	// The requested load went on without the caller: the answer loads
	// the network.
	g.Release()
	require.Eventually(t, func() bool { return l.Snapshot().Network("hang") != nil }, loadBound, 5*time.Millisecond)
	assert.Empty(t, l.Snapshot().Skipped())
	assert.Equal(t, 1, e.exec.Count(fakecni.Match{Verb: "VERSION", PluginType: "hang"}))
}

func TestRequestsWhileALoadRunsShareTheNext(t *testing.T) {
	e := newEnv(t)
	e.install(t, "slow")
	g := e.versionGate("slow", fakecni.IgnoreContext())
	l := e.loader(t, nil)
	t.Cleanup(g.Release)
	e.write(t, "10-slow.conflist", conflistOf("slow", "slow"))

	running := l.RequestLoad()
	g.WaitEntered(t, 1) // the requested load waits for VERSION
	next := l.RequestLoad()
	assert.NotEqual(t, running, next, "a load that already read the conf dir does not serve a later request")
	assert.Equal(t, next, l.RequestLoad(), "requests while a load runs share the next")

	g.Release()
	for _, ch := range []<-chan struct{}{running, next} {
		select {
		case <-ch:
		case <-time.After(loadBound):
			require.FailNow(t, "a requested load did not finish")
		}
	}
	assert.Equal(t, []string{"slow"}, l.Snapshot().Names())
	// Each load looks the plugin up once: the first load (before the
	// file) did not, the two requested loads did.
	assert.Equal(t, 2, e.exec.Lookups("slow"))
}

func TestShutdownKeepsServing(t *testing.T) {
	e := newEnv(t)
	l := e.loader(t, func(c *Config) { c.Watch = true })
	l.Shutdown()
	l.Shutdown()
	e.write(t, "10-a.conflist", conflistOf("a", "good"))
	var err error
	testenv.Within(t, loadBound, "Lookup", func() { _, _, err = l.Lookup(context.Background(), l.Snapshot(), "a") })
	require.NoError(t, err)
	require.NoError(t, l.Load(context.Background()))
	assert.Equal(t, "a", l.Snapshot().DefaultName())
}
