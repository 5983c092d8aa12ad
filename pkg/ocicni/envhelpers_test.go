package ocicni

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

func netnsDo(path string, fn func() error) error { return netns.Do(path, fn) }

func mustCurrent(t *testing.T, r types.Result) *types100.Result {
	t.Helper()
	require.NotNil(t, r)
	cur, err := types100.NewResultFromResult(r)
	require.NoError(t, err)
	return cur
}

// withWatcher re-enables the watcher that the integration env disables.
func withWatcher(o *options) error {
	o.watch = true
	return nil
}

// onlyFailure asserts that err is a *TeardownError with exactly one
// failure, on network, and returns it.
func onlyFailure(t *testing.T, err error, network string) Outcome {
	t.Helper()
	var te *TeardownError
	require.ErrorAs(t, err, &te)
	require.Len(t, te.Failures(), 1)
	require.Equal(t, network, te.Failures()[0].Network)
	return te.Failures()[0]
}

// requirePluginError asserts that err carries a *NetworkError for network
// and verb, and that the plugin's *types.Error with code is reachable.
func requirePluginError(t *testing.T, err error, network, verb string, code uint) {
	t.Helper()
	var ne *NetworkError
	require.ErrorAs(t, err, &ne)
	assert.Equal(t, network, ne.Network)
	assert.Equal(t, verb, ne.Verb)
	var ce *types.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, code, ce.Code)
}

// withGCPace sets how GC's DELs give way to setups (see gcPacer).
func withGCPace(p gcPace) Option {
	return func(o *options) error {
		o.gcPace = p
		return nil
	}
}
