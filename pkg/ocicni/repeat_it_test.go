package ocicni

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// The repro: a pod set up on bridge+host-local is set up again
// with the same request. The repeat runs no plugin and returns the first
// setup's result; eth0 keeps its IP and host-local its reservation. The
// control shows what the rule guards against: once a DEL was asked for
// (its failure recorded), the attachment is not live, the repeat runs ADD,
// bridge refuses it (eth0 exists) and the rollback deletes eth0.
func TestRepeatedSetupKeepsLiveAttachment(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.bridgeNet("bridgenet", "1.0.0")
	var runs healRuns
	m := e.start(WithPluginHook(runs.hook))
	pod := e.pod("web")
	first := e.setUp(pod)
	require.Len(t, first, 1)
	ips := resultIPs(t, first[0])
	require.Len(t, ips, 1)
	ip := strings.Split(ips[0], "/")[0]
	adds := runs.count("ADD", pod.ID, reasonSetup)
	record, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)

	again, err := m.SetUpPodWithContext(e.ctx(), pod)
	require.NoError(t, err, "an identical repeat succeeds")
	require.Len(t, again, 1)
	assert.Equal(t, first[0].NetAttachment, again[0].NetAttachment)
	assert.Equal(t, ips, resultIPs(t, again[0]), "the repeat returns the cached result")
	assert.Equal(t, adds, runs.count("ADD", pod.ID, reasonSetup), "the repeat ran no ADD")
	assert.Zero(t, runs.count("DEL", pod.ID, reasonRollback), "the repeat ran no rollback")
	assert.Equal(t, ips, testenv.AddrsIn(t, pod.NetNS, "eth0"), "eth0 keeps its IP")
	assert.Equal(t, []string{ip}, testenv.Reservations(t, e.dataDir, "bridgenet"), "the reservation stays")
	assert.Len(t, e.cacheFiles(), 1)
	now, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	assert.Equal(t, record, now, "the repeat writes no record")

	// Control: a failed DEL recorded since makes the attachment not live.
	now[0].Heal = &cache.Heal{Attempts: 1, Since: time.Now(), Next: time.Now().Add(time.Hour)}
	require.NoError(t, m.diskCache().WriteOrder(pod.ID, now))
	_, err = m.SetUpPodWithContext(e.ctx(), pod)
	var serr *SetupError
	require.ErrorAs(t, err, &serr, "bridge refuses a second ADD of eth0")
	assert.Equal(t, 1, runs.count("DEL", pod.ID, reasonRollback), "the rollback deleted it")
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth0"), "eth0 is gone")

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "bridgenet")
}

// A setup that would ADD a live attachment again in another netns, with
// other CNI_ARGS or with another config is refused with an
// *AttachedError before any plugin runs; the live attachment and its
// record stay as they were, and teardown releases everything.
func TestRepeatedSetupRefusesDifferentAttachment(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	n := e.bridgeNet("bridgenet", "1.0.0")
	var runs healRuns
	m := e.start(WithPluginHook(runs.hook))
	pod := e.pod("web")
	ips := resultIPs(t, e.setUp(pod)[0])
	record, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	otherNS := testenv.NewNS(t)

	tests := []struct {
		name   string
		prep   func(*PodNetwork)
		reason string
	}{
		{name: "another netns", prep: func(p *PodNetwork) { p.NetNS = otherNS }, reason: "lives in netns " + pod.NetNS},
		{name: "another pod name", prep: func(p *PodNetwork) { p.Name = "db" }, reason: "its CNI_ARGS differ"},
		{name: "a runtime config", prep: func(p *PodNetwork) {
			p.RuntimeConfig = map[string]RuntimeConfig{"bridgenet": {CgroupPath: "/kubepods/x"}}
		}, reason: "its runtime config differs"},
		{name: "another config", prep: func(*PodNetwork) {
			files, err := filepath.Glob(filepath.Join(e.confDir, "*-bridgenet.conflist"))
			require.NoError(t, err)
			require.Len(t, files, 1)
			testenv.WriteFile(t, e.confDir, filepath.Base(files[0]), testenv.BridgeConflist("bridgenet", "1.0.0", n, e.dataDir,
				`{"type":"tuning","mtu":1400}`))
			require.NoError(t, m.Reload(e.ctx()))
		}, reason: "its config differs from the loaded one"},
	}
	for _, tc := range tests { // in order: the last one changes the config
		t.Run(tc.name, func(t *testing.T) {
			req := pod
			tc.prep(&req)
			before := len(runs.all())
			_, err := m.SetUpPodWithContext(e.ctx(), req)
			require.ErrorIs(t, err, ErrAttachmentLive)
			var aerr *AttachedError
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, AttachedError{ContainerID: pod.ID, Network: "bridgenet", IfName: "eth0", Reason: tc.reason}, *aerr)
			assert.Len(t, runs.all(), before, "no plugin ran")
			assert.Equal(t, ips, testenv.AddrsIn(t, pod.NetNS, "eth0"), "eth0 keeps its IP")
			assert.Len(t, testenv.Reservations(t, e.dataDir, "bridgenet"), 1)
			now, err := m.diskCache().ReadOrder(pod.ID)
			require.NoError(t, err)
			assert.Equal(t, record, now, "the record is untouched")
		})
	}
	assert.Equal(t, []string{"lo"}, linksIn(t, otherNS), "nothing was attached in the other netns")

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod), "teardown uses the cached config")
	e.assertClean(pod, "bridgenet")
}

// A setup that asks for a live attachment and new ones adds only the new
// ones; when one of them fails, the rollback deletes what this call added
// and leaves the live attachment alone.
func TestRepeatedSetupRollsBackOnlyWhatItAdded(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	e.bridgeNet("bridgenet", "1.0.0")
	e.bridgeNet("second", "1.0.0")
	e.addConf("failing", e.recorder("failing", "1.0.0", map[string]any{"add": map[string]any{"errorCode": 11, "errorMsg": "busy"}}))
	var runs healRuns
	m := e.start(WithPluginHook(runs.hook))
	pod := e.pod("web")
	pod.Networks = []NetAttachment{{Name: "bridgenet"}}
	ips := resultIPs(t, e.setUp(pod)[0])

	grown := pod
	grown.Networks = []NetAttachment{{Name: "bridgenet"}, {Name: "second"}, {Name: "failing"}}
	_, err := m.SetUpPodWithContext(e.ctx(), grown)
	var serr *SetupError
	require.ErrorAs(t, err, &serr)
	assert.Nil(t, serr.Rollback, "the rollback succeeded")
	var rolledBack []string
	for _, r := range runs.all() {
		if r.Reason == reasonRollback && !slices.Contains(rolledBack, r.Network) {
			rolledBack = append(rolledBack, r.Network)
		}
	}
	assert.Equal(t, []string{"failing", "second"}, rolledBack, "the rollback deleted what the call added, in reverse")
	assert.Equal(t, ips, testenv.AddrsIn(t, pod.NetNS, "eth0"), "the live eth0 keeps its IP")
	assert.Nil(t, testenv.AddrsIn(t, pod.NetNS, "eth1"), "the added eth1 is gone")
	assert.Len(t, testenv.Reservations(t, e.dataDir, "bridgenet"), 1)
	assert.Empty(t, testenv.Reservations(t, e.dataDir, "second"))
	record, err := m.diskCache().ReadOrder(pod.ID)
	require.NoError(t, err)
	require.Len(t, record, 1, "only the live attachment stays recorded")
	assert.Equal(t, "bridgenet", record[0].Network)
	assert.Nil(t, record[0].Heal)

	// Without the failing network, the repeat adds only second.
	grown.Networks = grown.Networks[:2]
	before := len(runs.all())
	res, err := m.SetUpPodWithContext(e.ctx(), grown)
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, ips, resultIPs(t, res[0]))
	assert.Equal(t, testenv.AddrsIn(t, pod.NetNS, "eth1"), resultIPs(t, res[1]))
	ran := runs.all()[before:]
	assert.NotEmpty(t, ran)
	for _, r := range ran {
		assert.Equal(t, "second", r.Network, "only second's plugins ran")
	}

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), PodNetwork{ID: pod.ID, NetNS: pod.NetNS}))
	e.assertClean(pod, "bridgenet", "second")
}

// teardownGate lets a test check what a setup returned before any
// teardown can undo it. A setup that begins while no teardown is in flight
// is quiet: it holds teardowns off until it has checked. Setups that begin
// during a teardown race it and hold nothing.
type teardownGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running int // teardowns in flight
	holders int // quiet setups in flight or checking
}

func newTeardownGate() *teardownGate {
	g := &teardownGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// beginSetup reports whether the setup is quiet; a quiet one must call
// endSetup.
func (g *teardownGate) beginSetup() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running > 0 {
		return false
	}
	g.holders++
	return true
}

func (g *teardownGate) endSetup() {
	g.mu.Lock()
	g.holders--
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *teardownGate) beginTeardown() {
	g.mu.Lock()
	for g.holders > 0 {
		g.cond.Wait()
	}
	g.running++
	g.mu.Unlock()
}

func (g *teardownGate) endTeardown() {
	g.mu.Lock()
	g.running--
	g.cond.Broadcast()
	g.mu.Unlock()
}

// all returns the runs reported so far.
func (r *healRuns) all() []PluginRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

// sandboxCIDRs is resultIPs for goroutines: it returns its error.
func sandboxCIDRs(r NetResult) ([]string, error) {
	_, ips, err := SandboxIPs(r)
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.Address.String()
	}
	return out, err
}

// addrsOf is testenv.AddrsIn for goroutines: it returns its error.
func addrsOf(nsPath, ifname string) ([]string, error) {
	var out []string
	err := netnsDo(nsPath, func() error {
		iface, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		addrs, err := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				out = append(out, a.String())
			}
		}
		return err
	})
	return out, err
}

// Setups and teardowns of one sandbox ID race from several goroutines, in
// rounds. Every setup succeeds (a repeat is idempotent),
// and a setup that returned while no teardown ran after it finds its IP on
// eth0 and its reservation in place. The last teardown leaves nothing.
func TestRacingSetupsAndTeardownsOfOneSandbox(t *testing.T) {
	t.Parallel()
	e := newITEnv(t)
	n := e.bridgeNet("bridgenet", "1.0.0")
	m := e.start()
	pod := e.pod("race")
	const setups, teardowns, rounds = 4, 2, 6
	g := newTeardownGate()
	var mu sync.Mutex
	var errs []error
	checked, raced := 0, 0
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	setup := func(begun, returned func()) {
		quiet := g.beginSetup()
		begun()
		res, err := m.SetUpPodWithContext(e.ctx(), pod)
		returned()
		if err != nil {
			fail(err)
		}
		if !quiet {
			mu.Lock()
			raced++
			mu.Unlock()
			return
		}
		defer g.endSetup()
		if err != nil {
			return
		}
		cidr, err := sandboxCIDRs(res[0])
		if err != nil {
			fail(err)
			return
		}
		got, err := addrsOf(pod.NetNS, "eth0")
		if err != nil || !slices.Equal(cidr, got) {
			fail(errors.Join(errors.New("eth0 lost the IP a setup returned: got "+strings.Join(got, ",")+
				", returned "+strings.Join(cidr, ",")), err))
			return
		}
		owner, err := os.ReadFile(filepath.Join(e.dataDir, "bridgenet", strings.Split(cidr[0], "/")[0]))
		if err != nil || !strings.Contains(string(owner), pod.ID) {
			fail(errors.Join(errors.New("the reservation of a returned IP is gone"), err))
			return
		}
		mu.Lock()
		checked++
		mu.Unlock()
	}
	teardown := func(running func()) {
		g.beginTeardown()
		running()
		defer g.endTeardown()
		if err := m.TearDownPodWithContext(e.ctx(), pod); err != nil {
			fail(err)
		}
	}
	// Each round has three groups, released by events. The early setups
	// start at once and race each other; they are quiet (the last round's
	// teardowns are done), so every round checks them, each once all of
	// them have returned, so that what one did cannot undo another. The
	// teardowns wait until a setup has begun, and then for the quiet
	// setups to finish. The late setups start once a teardown is running,
	// and race it.
	for range rounds {
		begun, tearing := make(chan struct{}), make(chan struct{})
		var setupOnce, teardownOnce sync.Once
		var wg, early sync.WaitGroup
		early.Add(setups / 2)
		for i := range setups + teardowns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch {
				case i < setups/2: // early: each checks once all have returned
					setup(func() { setupOnce.Do(func() { close(begun) }) }, func() { early.Done(); early.Wait() })
				case i < setups: // late
					<-tearing
					setup(func() {}, func() {})
				default:
					<-begun
					teardown(func() { teardownOnce.Do(func() { close(tearing) }) })
				}
			}()
		}
		wg.Wait()
	}
	assert.Empty(t, errs)
	assert.GreaterOrEqual(t, checked, rounds, "every round checked a setup")
	t.Logf("%d of %d setups were checked with no teardown after them, %d raced a teardown", checked, setups*rounds, raced)

	require.NoError(t, m.TearDownPodWithContext(e.ctx(), pod))
	e.assertClean(pod, "bridgenet")
	assert.Empty(t, bridgePorts(t, n.Bridge), "no veth is left on the bridge")
}
