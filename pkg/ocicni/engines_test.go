package ocicni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// The tests of this file run several engines on one node: managers in
// one process (as Nomad makes one per allocation) and in other processes
// (as nerdctl's hooks, ocicnitool beside a runtime, or a runtime's old
// and new process during an upgrade), all on one conf dir and one cache
// dir. Their network chains a recorder that logs each call's start and
// end, and sleeps in ADD and DEL to widen the windows in which two
// operations on one container could overlap; none may.

// enginesEnv is an itEnv whose one network, "multi" (CNI 1.1.0, so GC
// sends the verb), chains bridge + host-local, a recorder that fails DEL
// with code 11 while the fault file exists, and a recorder that logs
// every call's start (e.logFile) and end (endLog) and sleeps 150 ms in
// ADD and 300 ms in DEL. DEL runs the chain backwards, so every DEL is
// logged, failed ones too.
type enginesEnv struct {
	*itEnv
	n      testenv.Net
	endLog string
	fault  string
}

func newEnginesEnv(t *testing.T) *enginesEnv {
	t.Helper()
	e := newITEnv(t)
	dir := filepath.Dir(e.logFile)
	ee := &enginesEnv{itEnv: e, endLog: filepath.Join(dir, "ends.jsonl"), fault: filepath.Join(dir, "fault")}
	ee.n = e.bridgeNet("multi", "1.1.0",
		testenv.RecorderConf("multi", "1.1.0", "", map[string]any{
			"del": map[string]any{"errorCode": 11, "errorMsg": "injected", "onlyIfExists": ee.fault},
		}),
		e.recorder("multi", "1.1.0", map[string]any{
			"endLogFile": ee.endLog,
			"add":        map[string]any{"sleepMs": 150},
			"del":        map[string]any{"sleepMs": 300},
		}))
	return ee
}

// engine starts one more manager on the env's dirs, shut down at the
// end of the test. Healing is off unless opts turn it on.
func (e *enginesEnv) engine(opts ...Option) *Manager {
	e.t.Helper()
	base := []Option{
		WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir),
		WithoutWatcher(), WithLogger(quietLog()), WithoutHealing(),
	}
	m, err := New(append(base, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return logrus.NewEntry(l)
}

// setFault turns the DEL fault on or off.
func (e *enginesEnv) setFault(on bool) {
	e.t.Helper()
	if on {
		require.NoError(e.t, os.WriteFile(e.fault, nil, 0o600))
	} else {
		require.NoError(e.t, os.Remove(e.fault))
	}
}

// spans returns every logged plugin call with its end.
func (e *enginesEnv) spans() []calllog.Span {
	e.t.Helper()
	starts, err := calllog.Read(e.logFile)
	require.NoError(e.t, err)
	ends, err := calllog.Read(e.endLog)
	require.NoError(e.t, err)
	return calllog.Spans(starts, ends)
}

// requireNoOverlap fails the test when two plugin calls on one container
// ran at once, or a call has no end (its plugin was cut off).
func (e *enginesEnv) requireNoOverlap() []calllog.Span {
	e.t.Helper()
	spans := e.spans()
	var lines []string
	for _, p := range calllog.Overlaps(spans) {
		lines = append(lines, fmt.Sprintf("%s %s %s-%s and %s %s-%s", p[0].ContainerID,
			p[0].Verb, stamp(p[0].Time), stamp(p[0].End), p[1].Verb, stamp(p[1].Time), stamp(p[1].End)))
	}
	require.Empty(e.t, lines, "plugin calls on one container that overlapped")
	return spans
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(no end)"
	}
	return t.Format("15:04:05.000")
}

// failedTeardowns sets n pods up with one engine, and tears them down
// while the DEL fault is on, so each keeps a pending retry; the engine is
// shut down and the fault cleared, as after a runtime that died.
func (e *enginesEnv) failedTeardowns(n int) []PodNetwork {
	e.t.Helper()
	m := e.engine()
	pods := make([]PodNetwork, n)
	for i := range pods {
		pods[i] = e.pod(fmt.Sprintf("pending%d", i))
		_, err := m.SetUpPodWithContext(e.ctx(), pods[i])
		require.NoError(e.t, err)
	}
	e.setFault(true)
	for _, pod := range pods {
		require.Error(e.t, m.TearDownPodWithContext(e.ctx(), pod))
	}
	require.NoError(e.t, m.Shutdown())
	e.setFault(false)
	pending, err := m.PendingTeardowns()
	require.NoError(e.t, err)
	require.Len(e.t, pending, n, "each failed teardown keeps a retry")
	return pods
}

// dels counts the DELs logged of each pod since t.
func dels(spans []calllog.Span, pods []PodNetwork, since time.Time) map[string]int {
	out := map[string]int{}
	for _, s := range spans {
		if s.Verb == "DEL" && !s.Time.Before(since) && slices.ContainsFunc(pods, func(p PodNetwork) bool { return p.ID == s.ContainerID }) {
			out[s.ContainerID]++
		}
	}
	return out
}

// nsPaths returns the pods' netns paths.
func nsPaths(pods []PodNetwork) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.NetNS
	}
	return out
}

// Ten engines resume the same five pending retries at once, in one
// process or in ten: each due DEL runs one at a time, and once the
// records are gone everything of the pods is.
func TestEnginesResumeRetriesOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(e *enginesEnv)
	}{
		{"ten engines in one process", func(e *enginesEnv) {
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for range 10 {
				m := e.engine(WithHealing(engineHeal))
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- healAll(m)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		}},
		{"ten processes", func(e *enginesEnv) {
			var procs []*exec.Cmd
			for range 10 {
				procs = append(procs, e.startEngineProcess(engineJob{Job: "heal"}))
			}
			for _, p := range procs {
				require.NoError(t, p.Wait(), "an engine process")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnginesEnv(t)
			pods := e.failedTeardowns(5)
			cleared := time.Now()
			tc.run(e)

			spans := e.requireNoOverlap()
			for _, pod := range pods {
				assert.Positive(t, dels(spans, pods, cleared)[pod.ID], "the retry of %s ran", pod.ID)
			}
			t.Logf("DELs per pod after the fault cleared: %v", dels(spans, pods, cleared))
			e.requireNoLeftovers(map[string]testenv.Net{"multi": e.n}, nsPaths(pods))
		})
	}
}

// engineHeal retries at once and often.
var engineHeal = HealPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, StartDelay: time.Millisecond}

// healAll waits until m knows of no pending retry, then shuts it down.
func healAll(m *Manager) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pending, err := m.PendingTeardowns()
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return m.Shutdown()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d retries still pending", len(pending))
		}
		time.Sleep(20 * time.Millisecond) // the records change in other engines: no event to wait on
	}
}

// One engine sets a pod up while another tears it down: the two run one
// after the other, and the pod ends as that order says. A setup that
// came second keeps its network.
func TestSetupAndTeardownFromTwoEngines(t *testing.T) {
	e := newEnginesEnv(t)
	m1, m2 := e.engine(), e.engine()
	var pods []PodNetwork
	orders := map[string]int{}
	for i := range 20 {
		pod := e.pod(fmt.Sprintf("race%d", i))
		pods = append(pods, pod)
		start := make(chan struct{})
		var res []NetResult
		var setupErr, teardownErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			res, setupErr = m1.SetUpPodWithContext(e.ctx(), pod)
		}()
		go func() {
			defer wg.Done()
			<-start
			teardownErr = m2.TearDownPodWithContext(e.ctx(), pod)
		}()
		close(start)
		wg.Wait()
		require.NoError(t, setupErr)
		require.NoError(t, teardownErr)

		order := e.serialOrder(pod.ID)
		orders[order]++
		ip := resultIP(t, res)
		if order == "ADD, DEL" {
			assert.Empty(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "round %d: the teardown came second: no eth0", i)
			assert.NotContains(t, testenv.Reservations(t, e.dataDir, "multi"), ip, "round %d: reservation", i)
			assert.NotContains(t, e.orderFiles(), pod.ID, "round %d: record", i)
			continue
		}
		assert.Contains(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), ip+"/24", "round %d: the setup came second: the pod keeps its address", i)
		assert.Contains(t, testenv.Reservations(t, e.dataDir, "multi"), ip, "round %d: reservation", i)
		assert.Contains(t, e.orderFiles(), pod.ID, "round %d: record", i)
		require.NoError(t, m1.TearDownPodWithContext(e.ctx(), pod))
	}
	t.Logf("orders: %v", orders)
	e.requireNoOverlap()
	e.requireNoLeftovers(map[string]testenv.Net{"multi": e.n}, nsPaths(pods))
}

// serialOrder says in which order the pod's ADD and DEL ran: "ADD, DEL",
// "DEL, ADD", or "ADD" when the teardown ran no DEL.
func (e *enginesEnv) serialOrder(id string) string {
	e.t.Helper()
	var verbs []string
	for _, s := range e.spans() {
		if s.ContainerID == id {
			verbs = append(verbs, s.Verb)
		}
	}
	return strings.Join(verbs, ", ")
}

// resultIP returns the address of the setup's first result.
func resultIP(t *testing.T, res []NetResult) string {
	t.Helper()
	ip, err := firstIP(res)
	require.NoError(t, err)
	return ip
}

func firstIP(res []NetResult) (string, error) {
	if len(res) == 0 {
		return "", errors.New("no result")
	}
	r, err := res[0].Result.GetAsVersion("1.0.0")
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	var out struct {
		IPs []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.IPs) == 0 {
		return "", fmt.Errorf("no address in the result: %w", err)
	}
	ip, _, _ := strings.Cut(out.IPs[0].Address, "/")
	return ip, nil
}

// A process that runs GC again and again, with the pods that a busy
// engine holds at that instant as valid, never takes a pod that a setup
// returned: each pod is checked after two whole GCs ran since its setup
// returned.
func TestGCFromAnotherProcessBesideABusyEngine(t *testing.T) {
	e := newEnginesEnv(t)
	a := e.engine()
	dir := filepath.Dir(e.logFile)
	job := engineJob{
		Job: "gc", Valid: filepath.Join(dir, "valid"), Stop: filepath.Join(dir, "stop"),
		Count: filepath.Join(dir, "gcs"),
	}
	held := &heldSet{path: job.Valid, ids: map[string]bool{}}
	held.write(t)
	b := e.startEngineProcess(job)

	const workers, cycles = 4, 5
	var mu sync.Mutex
	var pods []PodNetwork
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for i := range cycles {
					mu.Lock()
					pod := e.pod(fmt.Sprintf("busy%d-%d", w, i))
					pods = append(pods, pod)
					mu.Unlock()
					if err := e.holdThroughGCs(a, pod, held, job.Count); err != nil {
						return fmt.Errorf("pod %s: %w", pod.ID, err)
					}
				}
				return nil
			}()
		}()
	}
	// No barrier of its own: a worker waits for ten of the other process's
	// GCs, each wait bounded by holdThroughGCs (a minute) and each pod
	// operation by e.ctx(), which on a loaded machine add up to more than
	// testenv's barrier.
	for range workers {
		require.NoError(t, <-errs)
	}
	require.NoError(t, os.WriteFile(job.Stop, nil, 0o600))
	require.NoError(t, b.Wait(), "the GC process")
	gcs, err := readCount(job.Count)
	require.NoError(t, err)
	t.Logf("%d GCs from the other process while %d pods were set up and torn down", gcs, len(pods))

	e.requireNoOverlap()
	e.requireNoLeftovers(map[string]testenv.Net{"multi": e.n}, nsPaths(pods))
}

// holdThroughGCs sets pod up with m, adds it to the held set, waits until
// two GCs of the other process began after that, checks that the pod
// still has its address, reservation and cache entry, then takes it out
// of the held set and tears it down.
func (e *enginesEnv) holdThroughGCs(m *Manager, pod PodNetwork, held *heldSet, countFile string) error {
	res, err := m.SetUpPodWithContext(e.ctx(), pod)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	held.add(e.t, pod.ID)
	c0, err := readCount(countFile)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // the count is a file the other process writes
		c, err := readCount(countFile)
		if err != nil {
			return err
		}
		if c >= c0+2 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the other process ran no GC for a minute")
		}
	}
	ip, err := firstIP(res)
	if err != nil {
		return err
	}
	if !slices.Contains(testenv.AddrsIn(e.t, pod.NetNS, "eth0"), ip+"/24") {
		return fmt.Errorf("lost its address %s to the other process's GC", ip)
	}
	if !slices.Contains(testenv.Reservations(e.t, e.dataDir, "multi"), ip) {
		return fmt.Errorf("lost its reservation of %s to the other process's GC", ip)
	}
	if _, err := os.Stat(e.cachePath("multi", pod, "eth0")); err != nil {
		return fmt.Errorf("lost its cache entry to the other process's GC: %w", err)
	}
	held.remove(e.t, pod.ID)
	return m.TearDownPodWithContext(e.ctx(), pod)
}

// heldSet is the IDs of the pods that an engine holds, in a file that
// the GC process reads.
type heldSet struct {
	mu   sync.Mutex
	path string
	ids  map[string]bool
}

func (h *heldSet) add(t *testing.T, id string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[id] = true
	h.writeLocked(t)
}

func (h *heldSet) remove(t *testing.T, id string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ids, id)
	h.writeLocked(t)
}

func (h *heldSet) write(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writeLocked(t)
}

func (h *heldSet) writeLocked(t *testing.T) {
	t.Helper()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range h.ids {
			if !yield(id) {
				return
			}
		}
	})
	assert.NoError(t, writeAtomic(h.path, strings.Join(ids, "\n")))
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readCount reads the GC count the other process writes; none yet is 0.
func readCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// engineJob is what an engine process does (see TestEngineProcess).
type engineJob struct {
	ConfDir, CacheDir, BinDir string
	// Job is "heal" (resume the pending retries, exit once none is
	// left) or "gc" (run GC with the IDs of the Valid file as valid pods,
	// again and again, writing the count to the Count file, until the
	// Stop file exists), "teardown" (tear the pod ID in NetNS down,
	// then wait to be killed) or "teardown-exit" (tear it down and
	// exit, as a one-call process: an OCI hook).
	Job                string
	Valid, Stop, Count string
	ID, NetNS          string
	// ExtraBinDir is a bin dir searched after the plugins' (a test's
	// script plugins); Timeouts the networks' (see WithNetworkTimeouts).
	ExtraBinDir string
	Timeouts    Timeouts
}

const engineJobEnv = "OCICNI_ENGINE_JOB"

// startEngineProcess starts this test binary as an engine process on the
// env's dirs. The test waits for it; it is killed if the test ends first.
func (e *enginesEnv) startEngineProcess(job engineJob) *exec.Cmd {
	e.t.Helper()
	job.ConfDir, job.CacheDir, job.BinDir = e.confDir, e.cacheDir, pluginDir
	raw, err := json.Marshal(job)
	require.NoError(e.t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestEngineProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), engineJobEnv+"="+string(raw), testenv.PluginDirEnv+"="+pluginDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait() // killed
		}
	})
	return cmd
}

// TestEngineProcess is an engine process of the tests above; run alone,
// it does nothing.
func TestEngineProcess(t *testing.T) {
	raw := os.Getenv(engineJobEnv)
	if raw == "" {
		t.Skip("an engine process of the multi-engine tests")
	}
	var job engineJob
	require.NoError(t, json.Unmarshal([]byte(raw), &job))
	binDirs := []string{job.BinDir}
	if job.ExtraBinDir != "" {
		binDirs = append(binDirs, job.ExtraBinDir)
	}
	opts := []Option{
		WithConfDir(job.ConfDir), WithBinDirs(binDirs...), WithCacheDir(job.CacheDir),
		WithoutWatcher(), WithLogger(quietLog()), WithNetworkTimeouts(job.Timeouts),
	}
	switch job.Job {
	case "heal":
		m, err := New(append(opts, WithHealing(engineHeal))...)
		require.NoError(t, err)
		require.NoError(t, healAll(m))
	case "gc":
		m, err := New(append(opts, WithoutHealing())...)
		require.NoError(t, err)
		ctx := context.Background()
		for n := 1; ; n++ {
			if _, err := os.Stat(job.Stop); err == nil {
				break
			}
			b, err := os.ReadFile(job.Valid)
			require.NoError(t, err)
			var valid []*PodNetwork
			for _, id := range strings.Fields(string(b)) {
				valid = append(valid, &PodNetwork{ID: id})
			}
			if _, err := m.GCOutcomes(ctx, valid); err != nil {
				t.Logf("GC %d: %v", n, err)
			}
			require.NoError(t, writeAtomic(job.Count, strconv.Itoa(n)))
		}
		require.NoError(t, m.Shutdown())
	case "teardown":
		m, err := New(append(opts, WithoutHealing())...)
		require.NoError(t, err)
		require.NoError(t, m.TearDownPodWithContext(context.Background(), PodNetwork{ID: job.ID, NetNS: job.NetNS}))
		select {} // the test kills it
	case "setup":
		m, err := New(append(opts, WithoutHealing())...)
		require.NoError(t, err)
		_, err = m.SetUpPodWithContext(context.Background(), PodNetwork{Name: "p", Namespace: "ns", ID: job.ID, NetNS: job.NetNS})
		t.Logf("setup: %v", err)
		select {} // the test kills it
	case "teardown-exit":
		m, err := New(opts...) // healing on, by default
		require.NoError(t, err)
		err = m.TearDownPodWithContext(context.Background(), PodNetwork{ID: job.ID, NetNS: job.NetNS})
		t.Logf("teardown: %v", err)
	default:
		require.FailNow(t, "unknown job", job.Job)
	}
}

// A DEL that failed in a process that exited at once (an OCI hook's) is
// retried by an engine that runs longer and started before: it adopts
// the retry that the other process recorded, with no further call.
func TestLongLivedEngineAdoptsAnotherProcessRetry(t *testing.T) {
	t.Parallel()
	e := newEnginesEnv(t)
	m := e.engine(WithHealing(engineHeal))
	e.m = m // for requireHealed
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	e.setFault(true)
	hook := e.startEngineProcess(engineJob{Job: "teardown-exit", ID: pod.ID, NetNS: pod.NetNS})
	require.NoError(t, hook.Wait())
	pending, err := m.PendingTeardowns()
	require.NoError(t, err)
	require.Len(t, pending, 1, "the hook's DEL failed and left a retry")
	e.setFault(false)

	e.requireHealed(m, pod, "multi")
	e.requireNoOverlap()
	e.assertClean(pod, "multi")
}

// An engine process killed in the middle of a DEL leaves its plugin
// running, and the plugin keeps the sandbox locked until it exits: the
// teardown that another engine runs next waits for it, and the two
// DELs do not overlap.
func TestKilledEngineLeavesTheLockToItsPlugin(t *testing.T) {
	t.Parallel()
	e := newEnginesEnv(t)
	m := e.engine()
	e.m = m // for assertClean
	pod := e.pod("p")
	_, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err)

	cmd := e.startEngineProcess(engineJob{Job: "teardown", ID: pod.ID, NetNS: pod.NetNS})
	require.Eventually(t, func() bool {
		calls, err := calllog.Read(e.logFile)
		return err == nil && len(calllog.Filter(calls, "DEL")) > 0
	}, testenv.BarrierTimeout, 5*time.Millisecond, "the engine process's DEL starts")
	require.NoError(t, cmd.Process.Kill())
	killedAt := time.Now()
	_ = cmd.Wait() // killed

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	spans := e.requireNoOverlap()
	var dels []calllog.Span
	for _, sp := range spans {
		if sp.Verb == "DEL" && sp.ContainerID == pod.ID {
			dels = append(dels, sp)
		}
	}
	require.Len(t, dels, 2, "the killed engine's DEL, then this engine's")
	assert.True(t, dels[0].End.After(killedAt), "the engine was killed while its plugin ran")
	e.assertClean(pod, "multi")
}

// GC that cannot use the lock files (here their directory is a file)
// cannot keep other engines out of its verb phase, nor tell what they
// worked on lately: it sends no GC verb, which could release what they
// hold, and says so.
func TestGCVerbsWaitWhenLockFilesAreUnusable(t *testing.T) {
	e := newEnginesEnv(t)
	m := e.engine()
	require.NoError(t, os.MkdirAll(filepath.Join(e.cacheDir, "ocicni"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(e.cacheDir, "ocicni", "locks"), nil, 0o600))
	err := m.GC(e.ctx(), nil)
	require.ErrorIs(t, err, ErrGCVerbsSkipped)
	require.ErrorContains(t, err, "other engines")
	assert.Empty(t, e.calls("GC"), "no plugin got the GC verb")
}

// daemonizerPlugin is a shell plugin whose ADD starts a daemon that
// inherits every descriptor, as a plugin written in C or shell that forks
// without closing them does, and then hangs; its pids go to pids. Its
// other verbs succeed at once.
const daemonizerPlugin = `case "$CNI_COMMAND" in
ADD)
	sleep 3600 </dev/null >/dev/null 2>&1 &
	echo $! >>%[1]s
	echo $$ >>%[1]s
	exec sleep 3600 ;;
VERSION)
	echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
*)
	cat >/dev/null ;;
esac`

// An engine killed during an ADD leaves its plugin running, and the
// plugin a daemon that inherited the sandbox's lock file: once both have
// outlived the network's timeout, another engine's teardown takes the
// sandbox over (with a log line) and finishes, instead of waiting for the
// daemon for ever.
func TestTakeoverFromAKilledEnginesDaemon(t *testing.T) {
	t.Parallel()
	e := &enginesEnv{itEnv: newITEnv(t)}
	scripts := t.TempDir()
	pids := filepath.Join(t.TempDir(), "pids")
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "daemonizer"),
		[]byte("#!/bin/sh\n"+fmt.Sprintf(daemonizerPlugin, pids)+"\n"), 0o755))
	e.n = e.bridgeNet("held", "1.0.0", `{"type":"daemonizer"}`)
	timeouts := Timeouts{Add: 2 * time.Second, Del: 2 * time.Second, Check: 2 * time.Second}
	pod := e.pod("p")

	cmd := e.startEngineProcess(engineJob{Job: "setup", ID: pod.ID, NetNS: pod.NetNS, ExtraBinDir: scripts, Timeouts: timeouts})
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pids)
		return err == nil && len(strings.Fields(string(b))) == 2
	}, testenv.BarrierTimeout, 5*time.Millisecond, "the plugin started its daemon")
	b, err := os.ReadFile(pids)
	require.NoError(t, err)
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		testenv.KillOnCleanup(t, pid)
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed

	m := e.start(WithBinDirs(pluginDir, scripts), WithNetworkTimeouts(timeouts))
	start := time.Now()
	ctx, cancel := context.WithTimeout(e.ctx(), 30*time.Second)
	defer cancel()
	pod.Networks = nil
	require.NoError(t, m.TearDownPodWithContext(ctx, pod), "the teardown takes the sandbox over\n%s", e.managerLog())
	t.Logf("the teardown took %v with a network timeout of %v", time.Since(start).Round(time.Millisecond), timeouts.Add)
	took := 0
	for _, entry := range e.log.AllEntries() {
		if strings.HasPrefix(entry.Message, "Took over the lock of a sandbox") {
			took++
		}
	}
	assert.Equal(t, 1, took, "the takeover is logged")
	e.assertClean(pod, "held")
	assert.Empty(t, bridgePorts(t, e.n.Bridge), "the veth is gone")
}
