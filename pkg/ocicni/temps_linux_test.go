package ocicni

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The temporary file of a config save: another process's setup is stopped
// inside the save, holding the file (crashJob.PauseInConfigSave). While
// the write is in flight, neither GC nor an engine's start removes the
// file, and the setup then finishes; once the process is killed in the
// middle of the save, GC removes it, and so does the next engine's start.
func TestTempFilesOfConfigSaves(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	// A network per case: each setup writes its config's first copy.
	for _, n := range []string{"inflight", "crashgc", "crashstart"} {
		e.bridgeNet(n, "1.0.0")
	}
	m := e.start()
	podOn := func(network string) PodNetwork {
		pod := e.pod(network)
		pod.Networks = []NetAttachment{{Name: network}}
		return pod
	}
	job := func(pod PodNetwork) crashJob {
		return crashJob{ConfDir: e.confDir, CacheDir: e.cacheDir, BinDir: pluginDir, Verb: "setup", Pod: pod, PauseInConfigSave: true}
	}
	gc := func() {
		// Another process's setup may hold GC's verb back; what matters
		// here is what GC did to the temporary files before it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.GC(ctx, nil)
	}
	engineStarts := func() {
		other, err := New(WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir), WithoutWatcher(), WithoutHealing())
		require.NoError(t, err)
		require.NoError(t, other.Shutdown())
	}
	configTemps := func() []string {
		files, err := filepath.Glob(filepath.Join(m.diskCache().ConfigsDir(), ".tmp-*"))
		require.NoError(t, err)
		return files
	}

	t.Run("in flight", func(t *testing.T) {
		pod := podOn("inflight")
		h := startHelper(t, job(pod))
		tmp := h.waitPaused(t)
		require.Equal(t, []string{tmp}, configTemps())
		gc()
		require.FileExists(t, tmp, "GC left the temporary file that another process's write holds")
		engineStarts()
		require.FileExists(t, tmp, "an engine's start left it too")

		require.NoError(t, h.cmd.Process.Signal(syscall.SIGUSR1))
		assert.Equal(t, "<nil>", h.waitDone(t), "the other process's setup finished")
		assert.Empty(t, configTemps(), "its write renamed its temporary file")
		res, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
		require.NoError(t, err)
		require.Len(t, res, 1)
		h.kill(t, true)
		require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
		e.assertClean(pod, "inflight")
	})

	for _, sweep := range []struct {
		name, network string
		run           func()
	}{{"GC", "crashgc", gc}, {"engine start", "crashstart", engineStarts}} {
		t.Run("crashed, then "+sweep.name, func(t *testing.T) {
			pod := podOn(sweep.network)
			h := startHelper(t, job(pod))
			tmp := h.waitPaused(t)
			h.kill(t, true)
			require.FileExists(t, tmp, "the crash left the temporary file")

			sweep.run()
			assert.Empty(t, configTemps())
			_, err := os.Stat(tmp)
			require.ErrorIs(t, err, os.ErrNotExist)
			require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, sweep.network)
		})
	}
}
