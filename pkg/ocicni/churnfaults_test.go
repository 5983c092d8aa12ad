package ocicni

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// The faults of TestChurnUnderFaults: per-network flag files switch the
// recorders' errors and crashes, config rewrites bring hangs and remove
// networks, and hangWatch kills hung ADDs.

// churnFault is a fault that a flag file switches on, per network.
type churnFault int

const (
	faultAddErr   churnFault = iota // the recorder fails ADD with code 11
	faultAddCrash                   // a second recorder crashes on ADD
	faultDelErr                     // the recorder fails DEL and GC with code 100
	faultDelCrash                   // the second recorder crashes on DEL
	numChurnFaults
)

// churnVariant is a config file variant. The recorder's sleeps do not
// depend on flag files, so hangs come and go with config rewrites.
type churnVariant int

const (
	variantBase churnVariant = iota
	// variantAddHang: ADD hangs after bridge attached, until the test
	// cancels the setup (see hangWatch); the rollback then deletes.
	variantAddHang
	// variantDelHang: ADD fails after bridge attached, and the rollback's
	// DEL hangs until the rollback timeout kills it, which leaves an
	// attachment known only from the order record and its saved config.
	// DELs with that config hang until the test clears the faults, and
	// so do DELs with the loaded config while this variant is loaded.
	variantDelHang
	// variantSlowDel: ADD succeeds and caches a config whose DEL outlasts
	// every churn deadline; only the final cleanup deletes it.
	variantSlowDel
	numChurnVariants
)

var churnVariantNames = [numChurnVariants]string{"base", "add-hang", "del-hang", "slow-del"}

// churnNet is one bridge+host-local network chained with two recorders.
type churnNet struct {
	name, version string
	net           testenv.Net
	file          string
	flags         [numChurnFaults]string
}

// conflist returns the network's config in variant v: bridge with
// host-local, a recorder that logs every call and fails while a flag is
// on, a recorder that crashes while a flag is on, and for the hang
// variants a third recorder that sleeps (and logs a hung ADD to hangLog).
func (n *churnNet) conflist(e *itEnv, hangLog, delHangFlag string, v churnVariant) string {
	rec := e.recorder(n.name, n.version, map[string]any{
		"add": map[string]any{"errorCode": 11, "errorMsg": "injected ADD failure", "onlyIfExists": n.flags[faultAddErr]},
		"del": map[string]any{"errorCode": 100, "errorMsg": "injected DEL failure", "onlyIfExists": n.flags[faultDelErr]},
		"gc":  map[string]any{"errorCode": 11, "errorMsg": "injected GC failure", "onlyIfExists": n.flags[faultDelErr]},
	})
	crasher := testenv.RecorderConf(n.name, n.version, "", map[string]any{
		"add": map[string]any{"crash": true, "onlyIfExists": n.flags[faultAddCrash]},
		"del": map[string]any{"crash": true, "onlyIfExists": n.flags[faultDelCrash]},
	})
	plugins := []string{rec, crasher}
	switch v {
	case variantAddHang:
		plugins = append(plugins, testenv.RecorderConf(n.name, n.version, hangLog, map[string]any{
			"add": map[string]any{"sleepMs": churnHangMs},
		}))
	case variantDelHang:
		plugins = append(plugins, testenv.RecorderConf(n.name, n.version, "", map[string]any{
			"add": map[string]any{"errorCode": 11, "errorMsg": "ADD refused while DEL hangs"},
			// A DEL runs with the config of its ADD (cached, or saved
			// with the order record): the hang ends with the faults.
			"del": map[string]any{"sleepMs": churnHangMs, "onlyIfExists": delHangFlag},
		}))
	case variantSlowDel:
		plugins = append(plugins, testenv.RecorderConf(n.name, n.version, "", map[string]any{
			"del": map[string]any{"sleepMs": churnSlowDelMs},
		}))
	}
	return testenv.BridgeConflist(n.name, n.version, n.net, e.dataDir, plugins...)
}

// basePlugins is the plugin count of variantBase: bridge and two recorders.
const basePlugins = 3

// chaos is one random step of the environment: a fault flag resampled, a
// config file rewritten, removed or restored, a GC requested.
func (c *churn) chaos(r *rand.Rand) {
	for n := range churnNetworks {
		for k := range numChurnFaults {
			if r.Float64() < 0.25 {
				c.setFlag(n, k, r.Float64() < churnFaultOn)
			}
		}
	}
	if r.Float64() < 0.06 {
		c.changeConf(r.IntN(churnNetworks), r)
	}
	if r.Float64() < 0.2 {
		c.calmConf(r.IntN(churnNetworks)) // keeps hang episodes short, or the test is all waiting
	}
	if r.Float64() < 0.05 {
		select {
		case c.gcKick <- struct{}{}:
		default: // one is pending already
		}
	}
}

func (c *churn) setFlag(n int, k churnFault, on bool) {
	c.confMu.Lock()
	defer c.confMu.Unlock()
	if c.flagOn[n][k] == on {
		return
	}
	c.flagOn[n][k] = on
	path := c.nets[n].flags[k]
	if on {
		c.stats.flagsOn.Add(1)
		assert.NoError(c.t, os.WriteFile(path, nil, 0o644))
	} else {
		assert.NoError(c.t, os.Remove(path))
	}
}

// changeConf restores a removed config file, or else removes or rewrites
// it, as a network provider does.
func (c *churn) changeConf(n int, r *rand.Rand) {
	c.confMu.Lock()
	defer c.confMu.Unlock()
	cn := c.nets[n]
	switch {
	case !c.present[n]:
		c.present[n], c.variant[n] = true, variantBase
		c.stats.confRestored.Add(1)
		if err := c.writeConf(cn, variantBase); err != nil {
			c.t.Errorf("restoring %s: %v", cn.file, err)
		}
	case r.IntN(2) == 0:
		c.present[n] = false
		c.stats.confRemoved.Add(1)
		if err := os.Remove(cn.file); err != nil {
			c.t.Errorf("removing %s: %v", cn.file, err)
		}
	default:
		v := variantBase
		switch x := r.IntN(20); {
		case x < 5:
			v = variantAddHang
		case x < 9:
			v = variantDelHang
		case x < 13:
			v = variantSlowDel
		}
		c.variant[n] = v
		c.stats.variants[v].Add(1)
		assert.NoError(c.t, c.writeConf(cn, v))
	}
}

// calmConf restores a removed config file, or rewrites one of the hang
// variants as the base variant.
func (c *churn) calmConf(n int) {
	c.confMu.Lock()
	defer c.confMu.Unlock()
	if c.present[n] && c.variant[n] == variantBase {
		return
	}
	if !c.present[n] {
		c.stats.confRestored.Add(1)
	}
	c.present[n], c.variant[n] = true, variantBase
	assert.NoError(c.t, c.writeConf(c.nets[n], variantBase))
}

// writeConf replaces a config file atomically, as provisioning tools do.
func (c *churn) writeConf(n *churnNet, v churnVariant) error {
	f, err := os.CreateTemp(c.stage, n.name+"-*")
	if err != nil {
		return err
	}
	if _, err := f.WriteString(n.conflist(c.e, c.hangs.log, c.delHangFlag, v)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), n.file)
}

// restoreAll clears every fault, writes every config back in its base
// variant, and waits until the manager has loaded them.
func (c *churn) restoreAll() {
	t := c.t
	t.Helper()
	require.NoError(t, os.Remove(c.delHangFlag))
	for n := range c.nets {
		for k := range numChurnFaults {
			c.setFlag(n, k, false)
		}
		c.confMu.Lock()
		c.present[n], c.variant[n] = true, variantBase
		require.NoError(t, c.writeConf(c.nets[n], variantBase))
		c.confMu.Unlock()
	}
	require.Eventually(t, func() bool {
		set := c.m.e.snapshot()
		for _, n := range c.nets {
			if l := set.Network(n.name); l == nil || len(l.List.Plugins) != basePlugins {
				return false
			}
		}
		return true
	}, testenv.BarrierTimeout, 5*time.Millisecond, "the watcher loads the restored configs")
}

// hangWatch cancels a setup once a hung ADD has shown up in the hang
// log: the kill then lands in the hung recorder, after bridge and
// host-local returned, as a deadline that is short enough for a hang
// would land anywhere in an ordinary ADD on a loaded machine.
type hangWatch struct {
	log     string
	mu      sync.Mutex // guards cancels
	cancels map[string]context.CancelFunc
}

func (h *hangWatch) watch(id string, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancels[id] = cancel
}

func (h *hangWatch) unwatch(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cancels, id)
}

// run tails the hang log until stop is closed.
func (h *hangWatch) run(stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond) // polls the log
	defer tick.Stop()
	var offset int
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		data, err := os.ReadFile(h.log)
		if err != nil || len(data) <= offset {
			continue // no hang yet
		}
		for line := range bytes.Lines(data[offset:]) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // being appended
			}
			offset += len(line)
			var call calllog.Call
			if json.Unmarshal(line, &call) != nil || call.Verb != "ADD" {
				continue
			}
			h.mu.Lock()
			if cancel := h.cancels[call.ContainerID]; cancel != nil {
				cancel()
			}
			h.mu.Unlock()
		}
	}
}
