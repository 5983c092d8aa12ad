package ocicni

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// TestChurnUnderFaults sizing and fault parameters. The pod count sets the
// run time: about two minutes under -race on two cores.
const (
	churnSeed            = 0x0c1c41
	churnPods            = 700
	churnWorkers         = 8
	churnNetworks        = 3
	churnTeardownRetries = 3 // teardown attempts after the first, during churn
	// churnCallTimeout is the deadline of every churn teardown and GC,
	// and the rollback's timeout: it kills hung and slow DELs, and
	// ordinary ones on a loaded machine. DEL is safe to kill anywhere
	// (host-local releases an address by removing one file).
	churnCallTimeout = time.Second
	// churnSetupTimeout only guards against a stuck test. A setup's
	// context is cancelled when its ADD hangs (see hangWatch): host-local
	// reserves an address by creating a file and then writing the owner
	// into it, so a kill in between leaves a reservation that no DEL can
	// release, and a deadline would kill ordinary ADDs at random points.
	churnSetupTimeout = time.Minute
	// churnSlowDelMs is a DEL slower than churnCallTimeout, but finite,
	// so that an attachment cached with it is deleted by the final cleanup.
	churnSlowDelMs = 2500
	// churnHangMs is a plugin call that only ends when it is killed.
	churnHangMs = 600_000
	// churnFaultOn is the probability that a resampled fault flag is on.
	churnFaultOn = 0.1
	// churnHealOnlyEvery: every so many pods (a quarter) get one teardown
	// and nothing more from the test, neither a retry nor a final
	// teardown, as a runtime that gives up; only healing finishes them.
	churnHealOnlyEvery = 4
)

// churnHeal retries failed DELs quickly, and kills a hung one well before
// the test's own bounds (a slow DEL takes churnSlowDelMs).
var churnHeal = HealPolicy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, Timeout: 5 * time.Second, StartDelay: time.Millisecond}

// churnPod is one pod's life, kept for the report.
type churnPod struct {
	pod      PodNetwork // Networks holds the requested networks
	healOnly bool       // the test calls teardown once, and never again
	nsGone   bool       // its netns was removed
	clean    bool       // a teardown succeeded
	history  []string
}

func (p *churnPod) log(format string, args ...any) {
	p.history = append(p.history, fmt.Sprintf(format, args...))
}

// churnStats are the figures the test reports.
type churnStats struct {
	flagsOn, confRemoved, confRestored                          atomic.Int64
	variants                                                    [numChurnVariants]atomic.Int64
	setupOK, setupFailed, setupKilled, rollbackFailed           atomic.Int64
	setupNoNetwork, lockTimeouts, statusOK                      atomic.Int64
	teardownFirstTry, teardownRetries, teardownFailed, orphaned atomic.Int64
	healOnly, healOnlyFailed                                    atomic.Int64
	gcRuns, gcErrors, netnsRemoved                              atomic.Int64
	// okNanos and okMax time the successful setups and teardowns, to show
	// how far the churn deadline is from an ordinary call.
	okCalls, okNanos, okMax atomic.Int64
}

func (s *churnStats) timeOK(d time.Duration) {
	s.okCalls.Add(1)
	s.okNanos.Add(int64(d))
	for {
		cur := s.okMax.Load()
		if int64(d) <= cur || s.okMax.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// churn is the state shared by the workers, the chaos steps and GC.
type churn struct {
	t      *testing.T
	e      *itEnv
	m      *Manager
	nets   []*churnNet
	stage  string // where config files are written before the rename
	suffix string // makes the pod IDs of this run unique
	stats  churnStats

	confMu  sync.Mutex // guards present, variant, flagOn and the files they describe
	present []bool
	variant []churnVariant
	flagOn  [][numChurnFaults]bool

	// setupMu is held shared from a pod's registration as live until its
	// SetUpPod returns, and exclusively around each GC, so that the valid
	// set cannot miss a pod set up meanwhile: a runtime passes the
	// sandboxes it lists under its own lock. Lock order: setupMu, liveMu.
	setupMu sync.RWMutex
	liveMu  sync.Mutex // guards live
	live    map[string]*PodNetwork

	nsMu  sync.Mutex // guards netns
	netns []string   // every pod netns, removed or not

	gcKick      chan struct{}
	hangs       *hangWatch
	delHangFlag string // while it exists, DELs of variantDelHang configs hang
}

// TestChurnUnderFaults runs a few hundred pods on three real
// bridge+host-local networks while their plugins fail, crash and hang at
// random (fixed seed), their config files are rewritten, removed and
// restored, and GC runs with the live pods as valid. A quarter of the pods
// get one teardown and no other call, as from a runtime that gives up.
// Once the faults are cleared and the configs restored, retried teardowns
// of the others and the manager's background retries must leave nothing
// behind, before any GC: no reservation, veth, interface, cache entry,
// order record, host-local state or plugin process. One GC then finds
// nothing to do.
func TestChurnUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping churn test in short mode")
	}
	e := newITEnv(t)
	c := newChurn(t, e)
	anchors := c.startAnchors()

	start := time.Now()
	pods := make([]*churnPod, churnPods)
	var next atomic.Int64
	var wg sync.WaitGroup
	gcDone := make(chan struct{})
	go c.gcLoop(gcDone)
	hangsDone := make(chan struct{})
	go c.hangs.run(hangsDone)
	for range churnWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < churnPods; i = int(next.Add(1) - 1) {
				pods[i] = &churnPod{}
				c.runPod(i, pods[i])
			}
		}()
	}
	wg.Wait()
	close(c.gcKick)
	<-gcDone
	close(hangsDone)
	churnTime := time.Since(start)

	// Faults off, configs back, then every pod whose teardown still fails
	// is retried, as a runtime does for the sandboxes it could not stop.
	start = time.Now()
	c.restoreAll()
	finalTeardowns := c.finalTeardowns(pods)
	for _, a := range anchors {
		c.setLive(a, false)
		require.NoError(t, c.m.TearDownPodWithContext(e.ctx(), *a), "anchor %s", a.Name)
	}
	networks := map[string]testenv.Net{}
	for _, n := range c.nets {
		networks[n.name] = n.net
	}
	// Healing alone finishes what the runtime gave up on: no GC yet.
	healWait := time.Now()
	require.Eventually(t, func() bool {
		pending, err := c.m.PendingTeardowns()
		return err == nil && len(pending) == 0
	}, 3*time.Minute, 50*time.Millisecond, "background retries finish every failed teardown")
	healTime := time.Since(healWait)
	left := e.requireNoLeftovers(networks, c.netnsPaths())
	c.report(pods, left)
	healLeft := left.count()
	gcErr := c.m.GC(e.ctx(), []*PodNetwork{})
	require.NoError(t, gcErr, "final GC")
	left = e.requireNoLeftovers(networks, c.netnsPaths())
	c.report(pods, left)
	// The runtime removes every netns that is left. A handle on one that
	// this process kept open would keep it, and the host end of its veth
	// on a bridge, alive.
	removed := c.removeAllNetns()
	left = e.requireNoLeftovers(networks, nil)
	left.NetnsHandles = netnsHandles(t)
	assert.Empty(t, left.NetnsHandles, "the process's handles on namespaces other than the network namespace it started in")
	c.report(pods, left)
	t.Logf("after removing the %d netns left: %d veths on the bridges, %d handles on network namespaces",
		removed, portCount(left), len(left.NetnsHandles))

	s := &c.stats
	injected := s.flagsOn.Load() + s.confRemoved.Load()
	for v := variantAddHang; v < numChurnVariants; v++ {
		injected += s.variants[v].Load()
	}
	t.Logf("churn: %d pods, %d workers, %d networks, seed %#x, %v churn + %v cleanup",
		churnPods, churnWorkers, churnNetworks, churnSeed, churnTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("faults injected: %d (fault flags switched on %d, configs removed %d, restored %d, rewritten as %s)",
		injected, s.flagsOn.Load(), s.confRemoved.Load(), s.confRestored.Load(), c.variantCounts())
	t.Logf("setups: %d ok, %d failed (%d hung ADDs killed, %d with a failed rollback), %d with a network absent; %d status checks of live pods",
		s.setupOK.Load(), s.setupFailed.Load(), s.setupKilled.Load(), s.rollbackFailed.Load(),
		s.setupNoNetwork.Load(), s.statusOK.Load())
	t.Logf("teardowns: %d ok at the first try, %d retries during churn (%d orphaned outcomes), %d pods still failing after %d retries, %d final teardowns; %d netns removed by the 'runtime'; %d teardowns timed out waiting for GC",
		s.teardownFirstTry.Load(), s.teardownRetries.Load(), s.orphaned.Load(), s.teardownFailed.Load(),
		churnTeardownRetries, finalTeardowns, s.netnsRemoved.Load(), s.lockTimeouts.Load())
	if n := s.okCalls.Load(); n > 0 {
		t.Logf("successful setups and teardowns: %d, mean %v, max %v (teardown deadline %v)", n,
			time.Duration(s.okNanos.Load()/n).Round(time.Millisecond), time.Duration(s.okMax.Load()).Round(time.Millisecond), churnCallTimeout)
	}
	t.Logf("healing: %d pods got one teardown and no other call from the test, %d of them failed; pending retries done %v after the faults cleared; leftovers then, before any GC: %d",
		s.healOnly.Load(), s.healOnlyFailed.Load(), healTime.Round(time.Millisecond), healLeft)
	t.Logf("GC: %d runs concurrent with churn, %d returned errors; final GC error: %v", s.gcRuns.Load(), s.gcErrors.Load(), gcErr)
	t.Logf("leftovers: %d (%s)", left.count(), left)
}

func newChurn(t *testing.T, e *itEnv) *churn {
	t.Helper()
	c := &churn{
		t: t, e: e, stage: filepath.Join(filepath.Dir(e.confDir), "stage"), suffix: randHex(t),
		present: make([]bool, churnNetworks), variant: make([]churnVariant, churnNetworks),
		flagOn: make([][numChurnFaults]bool, churnNetworks),
		live:   map[string]*PodNetwork{}, gcKick: make(chan struct{}, 1),
		hangs: &hangWatch{log: filepath.Join(t.TempDir(), "hangs.jsonl"), cancels: map[string]context.CancelFunc{}},
	}
	require.NoError(t, os.MkdirAll(c.stage, 0o755))
	flagDir := t.TempDir()
	c.delHangFlag = filepath.Join(flagDir, "del-hang")
	require.NoError(t, os.WriteFile(c.delHangFlag, nil, 0o644))
	for i := range churnNetworks {
		n := &churnNet{name: fmt.Sprintf("churn%d", i), version: "1.0.0", net: testenv.Alloc(t)}
		if i == 1 {
			n.version = "1.1.0" // gets the GC verb
		}
		n.file = filepath.Join(e.confDir, fmt.Sprintf("%d0-%s.conflist", i+1, n.name))
		for k := range numChurnFaults {
			n.flags[k] = filepath.Join(flagDir, fmt.Sprintf("%s-fault%d", n.name, k))
		}
		c.nets = append(c.nets, n)
		c.present[i] = true
		require.NoError(t, c.writeConf(n, variantBase))
	}
	c.m = e.start(withWatcher, WithReloadDebounce(5*time.Millisecond), WithRollbackTimeout(churnCallTimeout), WithHealing(churnHeal))
	return c
}

// startAnchors sets up one pod per network that stays live until the
// end. It keeps a port on each bridge: when the last port goes, the
// kernel zeroes the bridge's MAC, and concurrent ADDs may then pin
// different ones, which fails bridge's CHECK for reasons unrelated to
// this test.
func (c *churn) startAnchors() []*PodNetwork {
	var anchors []*PodNetwork
	for _, n := range c.nets {
		a := c.e.pod("anchor-" + n.name)
		a.Networks = []NetAttachment{{Name: n.name}}
		c.e.setUp(a)
		c.setLive(&a, true)
		c.trackNetns(a.NetNS) // removed by testenv.NewNS's cleanup
		anchors = append(anchors, &a)
	}
	return anchors
}

// runPod is one pod's life: setup (faults roll it back), maybe a status
// check, then teardown, retried on error. Every random choice comes from
// the pod's own r, in a fixed order, so a seed replays the same pod.
func (c *churn) runPod(i int, p *churnPod) {
	r := rand.New(rand.NewPCG(churnSeed, uint64(i)))
	c.chaos(r)
	if !c.newPod(i, r, p) {
		return
	}
	err := c.setUpPod(p)
	if err == nil && r.IntN(2) == 0 {
		c.checkStatus(r, p)
	}
	c.setLive(&p.pod, false)
	c.tearDownPod(i, r, p)
}

// newPod makes pod i's netns and fills in p.pod, on a random non-empty
// subset of the networks. It reports false, having failed the test, when
// the netns cannot be made.
func (c *churn) newPod(i int, r *rand.Rand, p *churnPod) bool {
	t := c.t
	ns, err := netns.New()
	if err != nil {
		t.Errorf("pod %d: %v", i, err)
		return false
	}
	c.trackNetns(ns)
	t.Cleanup(func() {
		if err := netns.Remove(ns); err != nil {
			t.Errorf("remove netns %s: %v", ns, err)
		}
	})
	p.pod = PodNetwork{
		Name: fmt.Sprintf("p%03d", i), Namespace: "churn", UID: fmt.Sprintf("uid-%03d", i),
		ID: fmt.Sprintf("churn-%s-%03d", c.suffix, i), NetNS: ns,
	}
	for _, k := range r.Perm(churnNetworks)[:1+r.IntN(churnNetworks)] {
		p.pod.Networks = append(p.pod.Networks, NetAttachment{Name: c.nets[k].name})
	}
	return true
}

// setUpPod registers the pod as live and sets it up, under setupMu and
// with a deadline that the hang watch can cut short, then counts the
// result.
func (c *churn) setUpPod(p *churnPod) error {
	c.setupMu.RLock()
	c.setLive(&p.pod, true)
	ctx, cancel := context.WithTimeout(context.Background(), churnSetupTimeout)
	c.hangs.watch(p.pod.ID, cancel)
	began := time.Now()
	_, err := c.m.SetUpPodWithContext(ctx, p.pod)
	c.hangs.unwatch(p.pod.ID)
	cancel()
	c.setupMu.RUnlock()
	if err == nil {
		c.stats.timeOK(time.Since(began))
	}
	p.log("setup %v: %v", p.pod.Networks, err)
	c.countSetup(p, err)
	return err
}

// checkStatus checks a live pod's status under fresh faults.
func (c *churn) checkStatus(r *rand.Rand, p *churnPod) {
	c.chaos(r)
	// A live pod is never collected by GC, so CHECK passes whatever
	// the faults (they do not apply to CHECK).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	res, err := c.m.GetPodNetworkStatusWithContext(ctx, p.pod)
	cancel()
	if assert.NoError(c.t, err, "status of live pod %s", p.pod.ID) && assert.Len(c.t, res, len(p.pod.Networks)) {
		c.stats.statusOK.Add(1)
	}
}

// tearDownPod tears pod i down, retrying on error (a heal-only pod gets
// a single try, and healing does the rest), counts how it ended, and
// maybe removes its netns as a runtime would.
func (c *churn) tearDownPod(i int, r *rand.Rand, p *churnPod) {
	retries := churnTeardownRetries
	if p.healOnly = i%churnHealOnlyEvery == 1; p.healOnly {
		retries = 0
		c.stats.healOnly.Add(1)
	}
	for attempt := 0; attempt <= retries; attempt++ {
		if c.tryTeardown(r, p, attempt) {
			break
		}
	}
	switch {
	case !p.clean && p.healOnly:
		c.stats.healOnlyFailed.Add(1)
	case !p.clean:
		c.stats.teardownFailed.Add(1)
	case !p.nsGone && r.IntN(3) > 0:
		c.removeNetns(p, "after teardown")
	}
}

// tryTeardown makes one teardown attempt under fresh faults, with or
// without the networks and the netns, as runtimes do, and reports
// whether it succeeded. After a failure the runtime may give up on the
// netns.
func (c *churn) tryTeardown(r *rand.Rand, p *churnPod, attempt int) bool {
	if attempt > 0 {
		c.stats.teardownRetries.Add(1)
	}
	c.chaos(r)
	req := PodNetwork{Name: p.pod.Name, Namespace: p.pod.Namespace, UID: p.pod.UID, ID: p.pod.ID, NetNS: p.pod.NetNS}
	if r.IntN(2) == 0 {
		req.Networks = p.pod.Networks
	}
	if r.IntN(6) == 0 {
		req.NetNS = "" // by ID, as after a runtime restart
	}
	ctx, cancel := context.WithTimeout(context.Background(), churnCallTimeout)
	began := time.Now()
	err := c.m.TearDownPodWithContext(ctx, req)
	cancel()
	p.log("teardown %d (networks %v, netns %q): %v", attempt, req.Networks, req.NetNS, err)
	if err == nil {
		c.stats.timeOK(time.Since(began))
		p.clean = true
		if attempt == 0 {
			c.stats.teardownFirstTry.Add(1)
		}
		return true
	}
	c.countTeardownError(p, err)
	if !p.nsGone && r.IntN(6) == 0 {
		c.removeNetns(p, "after a failed teardown") // the runtime gave up on it
	}
	return false
}

func (c *churn) countSetup(p *churnPod, err error) {
	var se *SetupError
	switch {
	case err == nil:
		c.stats.setupOK.Add(1)
	case errors.As(err, &se):
		c.stats.setupFailed.Add(1)
		if errors.Is(err, context.Canceled) {
			c.stats.setupKilled.Add(1)
		}
		if se.Rollback != nil {
			c.stats.rollbackFailed.Add(1)
		}
	case errors.Is(err, ErrNetworkNotFound):
		c.stats.setupNoNetwork.Add(1)
	default:
		c.t.Errorf("pod %s: unexpected setup error: %v", p.pod.ID, err)
	}
}

func (c *churn) countTeardownError(p *churnPod, err error) {
	var te *TeardownError
	switch {
	case errors.As(err, &te):
		for _, o := range te.Failures() {
			if o.Class == Orphaned {
				c.stats.orphaned.Add(1)
			}
		}
	case errors.Is(err, context.DeadlineExceeded): // waiting for GC
		c.stats.lockTimeouts.Add(1)
	default:
		c.t.Errorf("pod %s: unexpected teardown error: %v", p.pod.ID, err)
	}
}

// finalTeardowns retries the teardown of every pod that is not clean
// yet, in parallel, and returns how many teardowns that took.
func (c *churn) finalTeardowns(pods []*churnPod) int64 {
	var count atomic.Int64
	var wg sync.WaitGroup
	todo := make(chan *churnPod)
	for range churnWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range todo {
				for attempt := 0; !p.clean && attempt < 3; attempt++ {
					count.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					req := PodNetwork{Name: p.pod.Name, Namespace: p.pod.Namespace, UID: p.pod.UID, ID: p.pod.ID, NetNS: p.pod.NetNS}
					err := c.m.TearDownPodWithContext(ctx, req)
					cancel()
					p.log("final teardown %d: %v", attempt, err)
					p.clean = err == nil
				}
				assert.True(c.t, p.clean, "pod %s: teardown fails with faults cleared and configs restored:\n%s",
					p.pod.ID, strings.Join(p.history, "\n"))
			}
		}()
	}
	for _, p := range pods {
		if p != nil && p.pod.ID != "" && !p.clean && !p.healOnly {
			todo <- p
		}
	}
	close(todo)
	wg.Wait()
	return count.Load()
}

// gcLoop runs GC, with the live pods as valid, each time a chaos step asks
// for it, until gcKick is closed.
func (c *churn) gcLoop(done chan<- struct{}) {
	defer close(done)
	for range c.gcKick {
		c.setupMu.Lock()
		valid := c.livePods()
		ctx, cancel := context.WithTimeout(context.Background(), churnCallTimeout)
		err := c.m.GC(ctx, valid)
		cancel()
		c.setupMu.Unlock()
		c.stats.gcRuns.Add(1)
		if err != nil {
			c.stats.gcErrors.Add(1)
		}
	}
}

func (c *churn) setLive(p *PodNetwork, live bool) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if live {
		c.live[p.ID] = p
	} else {
		delete(c.live, p.ID)
	}
}

func (c *churn) livePods() []*PodNetwork {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	out := make([]*PodNetwork, 0, len(c.live))
	for _, p := range c.live {
		q := *p
		out = append(out, &q)
	}
	return out
}

// trackNetns adds a pod netns to those checked for leftover interfaces.
func (c *churn) trackNetns(path string) {
	c.nsMu.Lock()
	defer c.nsMu.Unlock()
	c.netns = append(c.netns, path)
}

func (c *churn) netnsPaths() []string {
	c.nsMu.Lock()
	defer c.nsMu.Unlock()
	return append([]string(nil), c.netns...)
}

// removeAllNetns deletes every tracked netns that still exists, and
// returns how many it deleted.
func (c *churn) removeAllNetns() int {
	n := 0
	for _, ns := range c.netnsPaths() {
		if _, err := os.Stat(ns); err != nil {
			continue
		}
		if err := netns.Remove(ns); err != nil {
			c.t.Errorf("netns %s: %v", ns, err)
			continue
		}
		n++
	}
	return n
}

// removeNetns deletes a pod's netns, as a runtime does when it stops the
// sandbox, whether or not the teardown succeeded.
func (c *churn) removeNetns(p *churnPod, why string) {
	if err := netns.Remove(p.pod.NetNS); err != nil {
		c.t.Errorf("pod %s: %v", p.pod.ID, err)
		return
	}
	p.nsGone = true
	p.log("netns removed %s", why)
	c.stats.netnsRemoved.Add(1)
}

func (c *churn) variantCounts() string {
	parts := make([]string, 0, numChurnVariants)
	for v := range numChurnVariants {
		parts = append(parts, fmt.Sprintf("%s %d", churnVariantNames[v], c.stats.variants[v].Load()))
	}
	return strings.Join(parts, ", ")
}

// report logs, for every pod that leftovers name, its history and the
// manager's warnings about it, which is the reproduction of a leak.
func (c *churn) report(pods []*churnPod, left *leftovers) {
	if left.count() == 0 {
		return
	}
	byID := map[string]*churnPod{}
	ids := make([]string, 0, len(pods))
	for _, p := range pods {
		if p != nil {
			byID[p.pod.ID] = p
			ids = append(ids, p.pod.ID)
		}
	}
	for _, id := range left.owners(ids) {
		c.t.Logf("leaking pod %s (netns %s, removed %v):\n  %s", id, byID[id].pod.NetNS, byID[id].nsGone,
			strings.Join(byID[id].history, "\n  "))
		for _, entry := range c.e.log.AllEntries() {
			if entry.Data["sandbox"] == id && entry.Level <= logrus.WarnLevel {
				c.t.Logf("  log: %s %v %v", entry.Message, entry.Data, entry.Level)
			}
		}
	}
}
