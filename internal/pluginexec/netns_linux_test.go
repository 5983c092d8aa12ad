package pluginexec

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// A plugin run under WithNetNS starts in that namespace, at either
// priority, from whatever goroutine calls; one run without starts in the
// caller's. The thread that entered the namespace for a normal run goes
// back: the caller's runs afterwards start where they did before.
func TestWithNetNS(t *testing.T) {
	testenv.RequireRoot(t)
	path := testenv.NewNS(t)
	ns, err := os.Open(path)
	require.NoError(t, err)
	defer ns.Close()
	var target string
	require.NoError(t, netns.Do(path, func() error {
		target, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}))
	own, err := os.Readlink("/proc/thread-self/ns/net")
	require.NoError(t, err)
	require.NotEqual(t, own, target)
	plugin := testenv.Script(t, `readlink /proc/$$/ns/net`)
	for _, tc := range []struct {
		name      string
		ns, low   bool
		wantNetNS string
	}{
		{"caller's", false, false, own},
		{"entered", true, false, target},
		{"entered at low priority", true, true, target},
		{"caller's again", false, false, own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.ns {
				ctx = WithNetNS(ctx, ns)
			}
			if tc.low {
				ctx = WithLowPriority(ctx)
			}
			for i := range 20 { // more runs than the runtime has idle threads
				out, err := New(nil).ExecPlugin(ctx, plugin, nil, nil)
				require.NoError(t, err)
				assert.Equal(t, tc.wantNetNS, strings.TrimSpace(string(out)), fmt.Sprint("run ", i))
			}
		})
	}
}
