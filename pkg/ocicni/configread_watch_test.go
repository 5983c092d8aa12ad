//go:build !nowatchtests

package ocicni

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

func TestFIFOAddedLaterBlocksNeitherReloadsNorPodsNorShutdown(t *testing.T) {
	e := newWatchEnv(t)
	writeConf(t, e.confDir, "10-a.conflist", conflist("a", "1.0.0", "good"))
	m := e.manager(t)
	require.Equal(t, []string{"a"}, m.Networks())

	fifo := filepath.Join(e.confDir, "20-fifo.conflist")
	mkfifo(t, fifo)
	waitSkipped(t, m, fifo, ErrNotRegularFile)
	require.ErrorIs(t, skippedFile(m, fifo), ErrInvalidConfig)
	writeConf(t, e.confDir, "30-b.conflist", conflist("b", "1.0.0", "good"))
	waitNetworks(t, m, "a", "b")

	// An unknown network makes the pod operation reload: the FIFO is
	// skipped again, and the answer comes long before the context ends.
	pod := PodNetwork{
		Name: "p", Namespace: "ns", ID: "0123abcd", NetNS: t.TempDir(),
		Networks: []NetAttachment{{Name: "unknown"}},
	}
	// A FIFO that was opened would block for good: the bounds only tell
	// that from an answer.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.BarrierTimeout)
	defer cancel()
	var err error
	testenv.Within(t, 2*testenv.BarrierTimeout, "SetUpPod", func() { _, err = m.SetUpPodWithContext(ctx, pod) })
	require.ErrorIs(t, err, ErrNetworkNotFound)
	require.NoError(t, ctx.Err(), "answered before the context ended")

	testenv.Within(t, testenv.BarrierTimeout, "Shutdown", func() { require.NoError(t, m.Shutdown()) })
}
