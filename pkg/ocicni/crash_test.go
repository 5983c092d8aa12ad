package ocicni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// TestCrashRecovery parameters.
const (
	crashSeed  = 0xdead10cc
	crashKills = 30
	// crashHelperEnv carries the helper's job; TestCrashHelper skips
	// without it.
	crashHelperEnv = "OCICNI_CRASH_HELPER"
	// crashSlowMs is how long the recorder of network crashb sleeps in
	// ADD and DEL: a point where a kill lands inside a plugin.
	crashSlowMs = 150
	// crashWait bounds every wait for the helper: startup, a call to show
	// up, orphaned plugins to finish.
	crashWait = 30 * time.Second
)

// crashJob is what the helper process does.
type crashJob struct {
	ConfDir, CacheDir, BinDir string
	Verb                      string // "setup" or "teardown"
	Pod                       PodNetwork
	// PauseInConfigSave stops the first write of a saved config once it
	// holds its temporary file: the helper prints helperPaused and the
	// file's path, and goes on at SIGUSR1.
	PauseInConfigSave bool
}

// Lines the helper prints on its stdout.
const (
	helperReady  = "crash-helper: ready"
	helperDone   = "crash-helper: done: "
	helperPaused = "crash-helper: paused in a config save: "
)

// TestCrashHelper is the process that TestCrashRecovery kills: it creates
// a manager on the test's dirs, sets up or tears down one pod, reports,
// and waits to be killed.
func TestCrashHelper(t *testing.T) {
	raw := os.Getenv(crashHelperEnv)
	if raw == "" {
		t.Skip("run by TestCrashRecovery, in a process that it kills")
	}
	var job crashJob
	require.NoError(t, json.Unmarshal([]byte(raw), &job))
	logger := logrus.New()
	logger.SetOutput(os.Stderr)
	logger.SetLevel(logrus.DebugLevel)
	m, err := New(WithConfDir(job.ConfDir), WithBinDirs(job.BinDir), WithCacheDir(job.CacheDir),
		WithoutWatcher(), WithLogger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	if job.PauseInConfigSave {
		pauseInConfigSave(m.diskCache().ConfigsDir())
	}
	fmt.Println(helperReady)
	ctx := context.Background()
	switch job.Verb {
	case "setup":
		_, err = m.SetUpPodWithContext(ctx, job.Pod)
	case "teardown":
		err = m.TearDownPodWithContext(ctx, job.Pod)
	default:
		err = fmt.Errorf("unknown verb %q", job.Verb)
	}
	fmt.Printf("%s%v\n", helperDone, err)
	// The kill point must not depend on whether the operation finished.
	sigs, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	<-sigs.Done()
}

// pauseInConfigSave makes the first durable write into dir (a saved
// config's) stop once it holds its temporary file, until SIGUSR1.
func pauseInConfigSave(dir string) {
	var once sync.Once
	fsutil.TestHookTempHeld = func(path string) {
		if filepath.Dir(path) != dir {
			return
		}
		once.Do(func() {
			resume := make(chan os.Signal, 1)
			signal.Notify(resume, syscall.SIGUSR1)
			defer signal.Stop(resume)
			fmt.Printf("%s%s\n", helperPaused, path)
			<-resume
		})
	}
}

// crashCase is one kill, drawn from the seeded RNG.
type crashCase struct {
	verb     string   // what the helper does: "setup" or "teardown"
	order    []string // the pod's networks, in ADD order
	killAt   string   // "call", "delay" or "done"
	call     int      // with "call": kill once this many recorder calls of the verb are logged
	jitter   time.Duration
	session  bool   // kill the helper's whole session, plugins included; else orphans finish
	absent   bool   // config files are removed during the first recovery
	recovery string // "teardown", "gc" or "both"
}

func (c crashCase) String() string {
	at := c.killAt
	switch c.killAt {
	case "call":
		at = fmt.Sprintf("call%d+%v", c.call, c.jitter)
	case "delay":
		at = fmt.Sprintf("delay%v", c.jitter)
	}
	who := "orphans-finish"
	if c.session {
		who = "session-killed"
	}
	conf := "conf-present"
	if c.absent {
		conf = "conf-absent"
	}
	return fmt.Sprintf("%s/%s/%s/%s/%s/%s", c.verb, strings.Join(c.order, "+"), at, who, conf, c.recovery)
}

func drawCrashCases(r *rand.Rand) []crashCase {
	cases := make([]crashCase, crashKills)
	for i := range cases {
		c := &cases[i]
		c.verb = "setup"
		if i%2 == 1 {
			c.verb = "teardown"
		}
		c.order = []string{"crasha", "crashb"}
		if r.IntN(2) == 0 {
			c.order = []string{"crashb", "crasha"}
		}
		c.session = r.IntN(2) == 0
		switch x := r.IntN(10); {
		case c.verb == "setup" && c.session && x < 9:
			// host-local reserves an address by creating a file and then
			// writing the owner into it; a kill in between leaves a
			// reservation that no DEL can release. So the plugins die
			// with the helper only once every bridge ADD has returned
			// (the recorder of the last network runs after it).
			c.killAt, c.call, c.jitter = "call", 2, time.Duration(r.IntN(4))*time.Millisecond
		case x < 6:
			c.killAt, c.call, c.jitter = "call", 1+r.IntN(2), time.Duration(r.IntN(4))*time.Millisecond
		case x < 9:
			c.killAt, c.jitter = "delay", time.Duration(r.IntN(400))*time.Millisecond
		default:
			c.killAt = "done"
		}
		c.absent = r.IntN(2) == 0
		c.recovery = []string{"teardown", "gc", "both"}[r.IntN(3)]
	}
	return cases
}

// TestCrashRecovery kills, with SIGKILL at a random point (fixed seed), a
// process that sets up or tears down a pod on two real bridge+host-local
// networks, then recovers with a fresh manager: a teardown by sandbox ID
// and/or GC with no valid pod, first with the config files present or
// absent, then, if they were absent, again once they are back. Nothing may
// be left, even by the recovery without config files (the configs saved
// with the order record serve): no reservation, veth, interface, cache
// entry, order record, host-local state or plugin process.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping crash test in short mode")
	}
	testenv.RequireRoot(t)
	start := time.Now()
	var kills, finished, leftovers, absentErrs, pluginsRunning int
	for i, cc := range drawCrashCases(rand.New(rand.NewPCG(crashSeed, 0))) {
		// Sequential subtests: each kill gets its own dirs and networks,
		// so a leftover names the kill that caused it.
		t.Run(fmt.Sprintf("%02d/%s", i, cc), func(t *testing.T) {
			res := runCrashCase(t, cc)
			kills++
			leftovers += res.leftovers
			if res.finished {
				finished++
			}
			if res.absentErr != nil {
				absentErrs++
			}
			if res.orphans > 0 {
				pluginsRunning++
			}
		})
	}
	t.Logf("crash recovery: %d kills in %v (%d after the operation finished, %d while a plugin ran); "+
		"%d recoveries without config reported what they could not delete; leftovers: %d",
		kills, time.Since(start).Round(time.Millisecond), finished, pluginsRunning, absentErrs, leftovers)
}

// waitForKillPoint waits until the helper, which runs verb for sandbox
// id, reaches the point where cc kills it.
func (cc crashCase) waitForKillPoint(t *testing.T, h *helper, logFile, verb, id string) {
	t.Helper()
	switch cc.killAt {
	case "call":
		h.waitFor(t, func() bool { return loggedCalls(t, logFile, verb, id) >= cc.call })
		time.Sleep(cc.jitter) // randomness of the kill point only
	case "delay":
		h.waitFor(t, nil)
		time.Sleep(cc.jitter) // randomness of the kill point only
	case "done":
		h.waitFor(t, h.finished)
	}
}

// recoverSandbox recovers after a kill, by a fresh manager that knows
// only the sandbox ID: a teardown by ID, a GC, or both, as recovery says.
func recoverSandbox(e *itEnv, recovery, id string) error {
	var m *Manager
	if e.m == nil {
		m = e.start()
	} else {
		m = e.restart()
	}
	ctx := e.ctx()
	var errs []error
	if recovery != "gc" {
		errs = append(errs, m.TearDownPodWithContext(ctx, PodNetwork{ID: id}))
	}
	if recovery != "teardown" {
		errs = append(errs, m.GC(ctx, []*PodNetwork{}))
	}
	return errors.Join(errs...)
}

// crashResult is what one kill and its recovery came to.
type crashResult struct {
	finished  bool  // the helper's operation had finished when it was killed
	orphans   int   // plugin processes running when the helper was killed
	absentErr error // what the recovery without config reported
	leftovers int
}

func runCrashCase(t *testing.T, cc crashCase) crashResult {
	t.Helper()
	var res crashResult
	e := newITEnv(t)
	nets := map[string]testenv.Net{
		"crasha": e.bridgeNet("crasha", "1.0.0", e.recorder("crasha", "1.0.0", nil)),
		"crashb": e.bridgeNet("crashb", "1.1.0", e.recorder("crashb", "1.1.0", map[string]any{
			"add": map[string]any{"sleepMs": crashSlowMs}, "del": map[string]any{"sleepMs": crashSlowMs},
		})),
	}
	confs := map[string][]byte{}
	files, err := filepath.Glob(filepath.Join(e.confDir, "*"))
	require.NoError(t, err)
	for _, f := range files {
		confs[f], err = os.ReadFile(f)
		require.NoError(t, err)
	}
	pod := e.pod("crash")
	for _, n := range cc.order {
		pod.Networks = append(pod.Networks, NetAttachment{Name: n})
	}
	verb := "ADD"
	job := crashJob{ConfDir: e.confDir, CacheDir: e.cacheDir, BinDir: pluginDir, Verb: cc.verb, Pod: pod}
	if cc.verb == "teardown" {
		e.start()
		e.setUp(pod)
		verb = "DEL"
		job.Pod.Networks = nil // as after a restart: by the cache and the order record
	}

	h := startHelper(t, job)
	cc.waitForKillPoint(t, h, e.logFile, verb, pod.ID)
	res.finished = h.finished()
	res.orphans = h.kill(t, cc.session)
	t.Logf("killed after %d %s call(s); operation finished: %v (%s); %d plugin process(es) running at the kill",
		loggedCalls(t, e.logFile, verb, pod.ID), verb, res.finished, h.result(), res.orphans)

	recoverPod := func() error { return recoverSandbox(e, cc.recovery, pod.ID) }
	if cc.absent {
		for f := range confs {
			require.NoError(t, os.Remove(f))
		}
		res.absentErr = recoverPod()
		t.Logf("recovery without config: %v", res.absentErr)
		// Every attachment was recorded with its config before its ADD
		// ran, so the saved configs suffice.
		require.NoError(t, res.absentErr, "recovery without config files; helper log:\n%s", h.stderr())
		if left := e.requireNoLeftovers(nets, []string{pod.NetNS}); left.count() > 0 {
			res.leftovers += left.count()
			t.Logf("left after the recovery without config: %s\nthe recovering manager's log:\n%s", left, e.managerLog())
		}
		for f, b := range confs {
			require.NoError(t, os.WriteFile(f, b, 0o644))
		}
	}
	require.NoError(t, recoverPod(), "recovery with the config present; helper log:\n%s", h.stderr())

	left := e.requireNoLeftovers(nets, []string{pod.NetNS})
	res.leftovers += left.count()
	if res.leftovers > 0 {
		t.Logf("helper log:\n%s\nthe recovering manager's log:\n%s", h.stderr(), e.managerLog())
		for _, c := range e.calls("") {
			t.Logf("call: %s %s %s pid %d at %s", c.Verb, c.Network, c.IfName, c.PID, c.Time.Format("15:04:05.000000"))
		}
	}
	return res
}
