package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBarrierCountsLines(t *testing.T) {
	b := NewBarrier(t)
	assert.Equal(t, 0, b.Inside(t), "nothing entered before the file exists")
	require.NoError(t, os.WriteFile(b.EnteredFile, []byte("ADD c1 eth0\nADD c2 eth0\n"), 0o644))
	assert.Equal(t, 2, b.Inside(t))
	b.WaitEntered(t, 2)

	assert.NoFileExists(t, b.ReleaseFile)
	b.Release(t)
	b.Release(t)
	assert.FileExists(t, b.ReleaseFile)
	assert.Equal(t, map[string]any{"enteredFile": b.EnteredFile, "waitForFile": b.ReleaseFile, "errorCode": 7},
		b.Behaviour(map[string]any{"errorCode": 7}))
}

// TestBarrierHoldsRecorder runs the recorder through libcni with a barrier
// on ADD: the call is held until the barrier is released.
func TestBarrierHoldsRecorder(t *testing.T) {
	RequireRoot(t)
	b := NewBarrier(t)
	conf, err := libcni.NetworkPluginConfFromBytes([]byte(RecorderConf("held", "1.0.0", filepath.Join(t.TempDir(), "calls.jsonl"),
		map[string]any{"add": b.Behaviour(nil)})))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "held-ctr", NetNS: "/var/run/netns/none", IfName: "eth0"}

	done := make(chan error, 1)
	go func() {
		_, err := cni.AddNetwork(context.Background(), conf, rt)
		done <- err
	}()
	b.WaitEntered(t, 1)
	select {
	case err := <-done:
		require.FailNow(t, "ADD returned while held", "err=%v", err)
	default:
	}
	b.Release(t)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(BarrierTimeout):
		require.FailNow(t, "ADD did not return after the release")
	}
	assert.Equal(t, 1, b.Inside(t))
}
