package cni_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// Code written for go-cni calls New, maybe many times, and never
// Shutdown: each face, once unreachable, stops its engine, so that the
// goroutines and inotify instances of its engines do not pile up in the
// process. Faces kept reachable keep theirs.
func TestDroppedFacesStopTheirEngines(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "a", "1.0.0", "bridge")
	ctx := context.Background()
	settle := func() (int, int) {
		runtime.GC()
		return runtime.NumGoroutine(), inotifyFDs(t)
	}
	g0, fd0 := settle()

	const n = 20
	kept := make([]cni.CNI, 0, n)
	use := func(i int) cni.CNI {
		c, err := cni.New(cni.WithPluginDir([]string{env.BinDir}), cni.WithPluginConfDir(env.ConfDir),
			cni.WithDefaultConf, cni.WithEngineOptions(env.Options(ocicni.WithHealing(ocicni.HealPolicy{}))...))
		require.NoError(t, err)
		id := fmt.Sprintf("pod%d", i)
		ns := env.NetNS(t, id)
		_, err = c.Setup(ctx, id, ns)
		require.NoError(t, err)
		require.NoError(t, c.Remove(ctx, id, ns), "a lookup in the cache dir makes the engine's index")
		return c
	}
	for i := range n {
		kept = append(kept, use(i))
	}
	gKept, fdKept := settle()
	require.GreaterOrEqual(t, gKept, g0+n, "each engine runs its healing loop")
	require.GreaterOrEqual(t, fdKept, fd0+n, "each engine indexes the cache dir with inotify")
	require.Len(t, kept, n)

	kept = nil
	for i := range n {
		use(n + i) // dropped at once
	}
	require.Eventually(t, func() bool {
		g, fd := settle()
		return g <= g0+2 && fd <= fd0
	}, time.Minute, 10*time.Millisecond, "the dropped faces' engines stop")
	runtime.KeepAlive(kept)
}

// inotifyFDs counts the process's open inotify instances.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	count := 0
	for _, de := range des {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name())); err == nil && target == "anon_inode:inotify" {
			count++
		}
	}
	return count
}
