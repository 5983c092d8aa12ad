package cni_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
	cni "github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// hookJob is what one hook process does (see TestFaceHookProcess).
type hookJob struct {
	ConfFile, CacheDir, BinDir, ID, NetNS string
}

const hookJobEnv = "OCICNI_FACE_HOOK_JOB"

// nerdctl runs each OCI hook as a process of its own that calls New,
// then Remove and Setup, or Remove, and exits without any Shutdown (go-cni
// has none). Ten such processes run at once beside five teardowns whose
// DEL failed in an engine that is gone: the hooks start none of those
// retries (each would be cut off as its process exits), their own pods
// leave nothing, no two calls on one container overlap, and the five
// retries stay pending, whole, until an engine that lives longer
// finishes them.
func TestFaceHookProcessesThatExit(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	n := testenv.Alloc(t)
	dataDir, cacheDir := filepath.Join(dir, "ipam"), filepath.Join(dir, "cache")
	logFile, endLog, fault := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "ends.jsonl"), filepath.Join(dir, "fault")
	conf := testenv.BridgeConflist("hooks", "1.0.0", n, dataDir,
		testenv.RecorderConf("hooks", "1.0.0", "", map[string]any{
			"del": map[string]any{"errorCode": 11, "errorMsg": "injected", "onlyIfExists": fault},
		}),
		testenv.RecorderConf("hooks", "1.0.0", logFile, map[string]any{
			"endLogFile": endLog, "add": map[string]any{"sleepMs": 150}, "del": map[string]any{"sleepMs": 300},
		}))
	confFile := testenv.WriteFile(t, dir, "hooks.conflist", conf)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	face := func(opts ...ocicni.Option) *cni.Face {
		c, err := cni.New(cni.WithPluginDir([]string{pluginDir}), cni.WithConfListBytes([]byte(conf)),
			cni.WithEngineOptions(append([]ocicni.Option{ocicni.WithCacheDir(cacheDir)}, opts...)...))
		require.NoError(t, err)
		return c.(*cni.Face)
	}

	// Five Removes fail in an engine that then goes.
	first := face(ocicni.WithoutHealing())
	pending := make(map[string]string, 5) // ID -> netns
	for i := range 5 {
		id := fmt.Sprintf("pending%d", i)
		pending[id] = testenv.NewNS(t)
		_, err := first.Setup(ctx, id, pending[id])
		require.NoError(t, err)
	}
	testenv.WriteFile(t, dir, "fault", "")
	for id, ns := range pending {
		require.Error(t, first.Remove(ctx, id, ns))
	}
	require.NoError(t, first.Shutdown())
	require.NoError(t, os.Remove(fault))
	cleared := time.Now()

	// Ten hook processes at once.
	var procs []*exec.Cmd
	var hooks []string
	for i := range 10 {
		job := hookJob{ConfFile: confFile, CacheDir: cacheDir, BinDir: pluginDir, ID: fmt.Sprintf("hook%d", i), NetNS: testenv.NewNS(t)}
		hooks = append(hooks, job.ID)
		procs = append(procs, startHook(t, job))
	}
	for _, p := range procs {
		require.NoError(t, p.Wait(), "a hook process")
	}

	spans := hookSpans(t, logFile, endLog)
	for _, s := range spans {
		assert.False(t, s.End.IsZero(), "%s of %s started at %s and was cut off", s.Verb, s.ContainerID, s.Time.Format(time.StampMilli))
		if _, ok := pending[s.ContainerID]; ok && s.Verb == "DEL" && s.Time.After(cleared) {
			assert.Fail(t, "a hook process retried a pending DEL", "%s at %s", s.ContainerID, s.Time.Format(time.StampMilli))
		}
	}
	assert.Empty(t, overlapping(spans), "calls on one container that overlapped")
	owners := reservationOwners(t, dataDir, "hooks")
	for _, id := range hooks {
		assert.NotContains(t, owners, id, "the hook's own pod keeps no reservation")
	}
	still, err := first.Engine().PendingTeardowns()
	require.NoError(t, err)
	assert.Len(t, still, 5, "no pending retry is lost")
	for id := range pending {
		assert.Contains(t, owners, id, "a pending teardown is whole: its reservation is still there")
	}

	// An engine that lives on finishes them.
	last := face(ocicni.WithHealing(ocicni.HealPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, StartDelay: time.Millisecond}))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) { // the records are the only event
		left, err := last.Engine().PendingTeardowns()
		require.NoError(t, err)
		if len(left) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "retries still pending after a minute: %d", len(left))
	}
	require.NoError(t, last.Shutdown())
	assert.Empty(t, testenv.Reservations(t, dataDir, "hooks"), "reservations")
	assert.Empty(t, listDir(t, filepath.Join(cacheDir, "results")), "cache entries")
	assert.Empty(t, listDir(t, filepath.Join(cacheDir, "ocicni", "attachments")), "order records")
	assert.Empty(t, listDir(t, filepath.Join(cacheDir, "ocicni", "locks")), "sandbox lock files")
	ports, err := os.ReadDir(filepath.Join("/sys/class/net", n.Bridge, "brif"))
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	assert.Empty(t, ports, "veths on the bridge")
	assert.Empty(t, overlapping(hookSpans(t, logFile, endLog)), "calls on one container that overlapped")
}

// overlapping describes the pairs of calls on one container that ran at
// once.
func overlapping(spans []calllog.Span) []string {
	var out []string
	for _, p := range calllog.Overlaps(spans) {
		out = append(out, fmt.Sprintf("%s: %s at %s, %s at %s", p[0].ContainerID,
			p[0].Verb, p[0].Time.Format(time.StampMilli), p[1].Verb, p[1].Time.Format(time.StampMilli)))
	}
	return out
}

// startHook starts this test binary as a hook process.
func startHook(t *testing.T, job hookJob) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(job)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaceHookProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), hookJobEnv+"="+string(raw), testenv.PluginDirEnv+"="+pluginDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait() // killed
		}
	})
	return cmd
}

// TestFaceHookProcess is one hook process of TestFaceHookProcessesThatExit,
// as nerdctl's createRuntime and postStop hooks run: New, a Remove whose
// error is ignored, Setup, Remove, and exit. Run alone, it does nothing.
func TestFaceHookProcess(t *testing.T) {
	raw := os.Getenv(hookJobEnv)
	if raw == "" {
		t.Skip("a hook process of TestFaceHookProcessesThatExit")
	}
	var job hookJob
	require.NoError(t, json.Unmarshal([]byte(raw), &job))
	conf, err := os.ReadFile(job.ConfFile)
	require.NoError(t, err)
	c, err := cni.New(cni.WithPluginDir([]string{job.BinDir}), cni.WithConfListBytes(conf),
		cni.WithEngineOptions(ocicni.WithCacheDir(job.CacheDir)))
	require.NoError(t, err)
	ctx := context.Background()
	_ = c.Remove(ctx, job.ID, "") // nerdctl's, before every setup; its error is ignored
	_, err = c.Setup(ctx, job.ID, job.NetNS)
	require.NoError(t, err)
	require.NoError(t, c.Remove(ctx, job.ID, job.NetNS))
}

func hookSpans(t *testing.T, logFile, endLog string) []calllog.Span {
	t.Helper()
	starts, err := calllog.Read(logFile)
	require.NoError(t, err)
	ends, err := calllog.Read(endLog)
	require.NoError(t, err)
	return calllog.Spans(starts, ends)
}

// reservationOwners returns the container IDs that own the network's
// host-local reservations.
func reservationOwners(t *testing.T, dataDir, network string) []string {
	t.Helper()
	var out []string
	for _, ip := range testenv.Reservations(t, dataDir, network) {
		b, err := os.ReadFile(filepath.Join(dataDir, network, ip))
		require.NoError(t, err)
		out = append(out, strings.Fields(string(b))[0])
	}
	return out
}

// listDir lists a directory's entries but hidden ones; a missing one
// holds none.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, d := range des {
		if !strings.HasPrefix(d.Name(), ".") {
			out = append(out, d.Name())
		}
	}
	return out
}
