package ocicni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// withVersionWait sets how long a load waits for VERSION answers.
func withVersionWait(d time.Duration) Option {
	return func(o *options) error {
		o.versionWait = d
		return nil
	}
}

// withVersionTimeout sets how long one VERSION call may take.
func withVersionTimeout(d time.Duration) Option {
	return func(o *options) error {
		o.versionTimeout = d
		return nil
	}
}

// longWait makes loads wait for every VERSION answer within a test.
const longWait = time.Minute

func TestVersionFailureIsRememberedUntilTheBinaryChanges(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(e *loaderEnv) (release func())
		wantErr error
	}{
		{
			name: "VERSION fails",
			setup: func(e *loaderEnv) func() {
				e.exec.FailPlugin("broken", "VERSION", errors.New("exec format error"))
				return func() {}
			},
			wantErr: ErrVersionFailed,
		},
		{
			name: "VERSION never answers",
			setup: func(e *loaderEnv) func() {
				return e.exec.Gate(fakecni.Match{PluginType: "broken"}).Release
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoaderEnv(t)
			installPlugin(t, e.binDir, "broken")
			for i := range 3 {
				writeConf(t, e.confDir, fmt.Sprintf("%02d.conflist", i), conflist(fmt.Sprintf("net%d", i), "1.0.0", "broken"))
			}
			writeConf(t, e.confDir, "50-ok.conflist", conflist("ok", "1.0.0", "good"))
			release := tt.setup(e)
			m := e.managerWithin(t, loadBound, withVersionWait(longWait), withVersionTimeout(50*time.Millisecond))
			t.Cleanup(release)

			assert.Equal(t, []string{"ok"}, m.Networks())
			require.Len(t, m.Skipped(), 3)
			for _, sk := range m.Skipped() {
				require.ErrorIs(t, sk, ErrVersionFailed)
				require.ErrorIs(t, sk, tt.wantErr)
			}
			assert.Equal(t, 1, e.versionCalls("broken"), "one call for three files")

			for range 3 {
				testenv.Within(t, loadBound, "reload", func() { assert.NoError(t, m.Reload(context.Background())) })
			}
			assert.Equal(t, 1, e.versionCalls("broken"), "the failure is remembered")
			assert.Len(t, m.Skipped(), 3)

			// A new binary is asked again.
			require.NoError(t, os.WriteFile(filepath.Join(e.binDir, "broken"), []byte("#!/bin/false\n# v2\n"), 0o755))
			testenv.Within(t, loadBound, "reload", func() { assert.NoError(t, m.Reload(context.Background())) })
			assert.Equal(t, 2, e.versionCalls("broken"))
		})
	}
}

func TestVersionCallsOfDistinctBinariesRunConcurrently(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "a")
	installPlugin(t, e.binDir, "b")
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "a"))
	writeConf(t, e.confDir, "20-b.conflist", conflist("b", "1.0.0", "b"))
	a := e.exec.Gate(fakecni.Match{PluginType: "a"}, fakecni.IgnoreContext())
	b := e.exec.Gate(fakecni.Match{PluginType: "b"}, fakecni.IgnoreContext())
	t.Cleanup(a.Release) // runs after the test fails, if it does
	t.Cleanup(b.Release)

	opts := e.options(t, withVersionWait(longWait))
	started := make(chan struct{})
	var m *Manager
	var err error
	go func() {
		defer close(started)
		m, err = New(opts...)
	}()
	// Both are running: neither waits for the other.
	a.WaitEntered(t, 1)
	b.WaitEntered(t, 1)
	a.Release()
	b.Release()
	select {
	case <-started:
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Shutdown()) })
		assert.Equal(t, []string{"a", "b"}, m.Networks())
	case <-time.After(loadBound):
		require.FailNow(t, "New did not return")
	}
}

func TestHungVersionDoesNotDelayOtherFiles(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "hang")
	writeConf(t, e.confDir, "00-hang.conflist", conflist("hang", "1.0.0", "hang"))
	writeConf(t, e.confDir, "10-good.conflist", conflist("good", "1.0.0", "good"))
	g := e.exec.Gate(fakecni.Match{PluginType: "hang"}, fakecni.IgnoreContext())
	m := e.managerWithin(t, loadBound, withVersionWait(50*time.Millisecond))
	t.Cleanup(g.Release)

	assert.Equal(t, []string{"good"}, m.Networks())
	assert.Equal(t, "good", m.GetDefaultNetworkName())
	hang := skippedFile(m, filepath.Join(e.confDir, "00-hang.conflist"))
	require.ErrorIs(t, hang, ErrVersionPending)

	// A pod that asks for the network waits for the answer, within its
	// context, rather than failing while the answer is pending.
	found := make(chan error, 1)
	go func() {
		_, _, err := m.e.lookup(context.Background(), m.e.snapshot(), "hang")
		found <- err
	}()
	g.Release()
	select {
	case err := <-found:
		require.NoError(t, err)
	case <-time.After(loadBound):
		require.FailNow(t, "lookup did not return once VERSION answered")
	}
	// The answer alone brings the network in, with no event or request.
	assert.Equal(t, []string{"good", "hang"}, m.Networks())
	assert.Equal(t, "hang", m.GetDefaultNetworkName())
	assert.Empty(t, m.Skipped())
}

func TestPendingVersionKeepsTheNetworkLoadedBefore(t *testing.T) {
	e := newLoaderEnv(t)
	installPlugin(t, e.binDir, "slow")
	path := writeConf(t, e.confDir, "10-net.conflist", conflist("net", "1.0.0", "good"))
	g := e.exec.Gate(fakecni.Match{PluginType: "slow"}, fakecni.IgnoreContext())
	m := e.manager(t, withVersionWait(50*time.Millisecond))
	t.Cleanup(g.Release)
	require.Equal(t, []string{"good"}, pluginTypes(m, "net"))

	require.NoError(t, os.WriteFile(path, []byte(conflist("net", "1.0.0", "slow")), 0o644))
	testenv.Within(t, loadBound, "reload", func() { assert.NoError(t, m.Reload(context.Background())) })
	assert.Equal(t, []string{"good"}, pluginTypes(m, "net"), "the last good config stays while VERSION is pending")
	require.ErrorIs(t, skippedFile(m, path), ErrVersionPending)

	g.Release()
	require.Eventually(t, func() bool {
		types := pluginTypes(m, "net")
		return len(types) == 1 && types[0] == "slow"
	}, loadBound, 5*time.Millisecond)
}
