package ocicni

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"

	confbuild "github.com/seed-671fdd43/ocicni/internal/conflist"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// fakeExec is the one plugin executor of this package's internal tests.
// They cannot use ocicnitest.FakeExec, which the external tests and the
// runtimes use: ocicnitest imports this package. fakeExec therefore
// keeps to the same model on a smaller scale: answers by plugin type,
// every call recorded, gates that hold calls until the test releases
// them, lookups counted, and a find mode. A new fault is a new option
// here, not a new type.
//
// Without a script it answers VERSION with every spec version, ADD with
// an empty result and every other verb with success. By default
// FindInPath finds a plugin where a file of its name exists, so that
// tests install and remove plugins while the manager watches.
type fakeExec struct {
	mu       sync.Mutex
	versions map[string][]string // plugin type -> supported versions
	failing  map[string]bool     // plugin type -> VERSION fails
	find     findMode
	only     map[string]bool // with findAny: the types found; nil means all
	lookups  map[string]int  // plugin -> FindInPath calls
	gates    []*execGate
	calls    []execCall
}

// findMode is how fakeExec.FindInPath finds plugins, as
// ocicnitest.FindMode.
type findMode int

const (
	findOnDisk    findMode = iota // the first bin dir with a file of the plugin's name
	findAny                       // every type (or those of only) under the first bin dir, without looking
	findUnchecked                 // any name, hostile ones included, joined to the first bin dir
)

// execCall is one recorded call: what the plugin would have received.
type execCall struct {
	verb, typ string
	env       map[string]string // the CNI_ variables
	stdin     map[string]any    // nil when stdin is not a JSON object
}

func newFakeExec() *fakeExec {
	return &fakeExec{versions: map[string][]string{}, failing: map[string]bool{}, lookups: map[string]int{}}
}

// newPodExec returns a fakeExec for pod operations: it finds the plugin
// type "fake" in the first bin dir without looking, and no other type.
func newPodExec() *fakeExec {
	f := newFakeExec()
	f.setFind(findAny, "fake")
	return f
}

// setFind sets the find mode; with findAny, only limits the types found.
func (f *fakeExec) setFind(mode findMode, only ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.find, f.only = mode, nil
	if len(only) > 0 {
		f.only = map[string]bool{}
		for _, typ := range only {
			f.only[typ] = true
		}
	}
}

// fail makes VERSION of typ fail, like a broken binary.
func (f *fakeExec) fail(typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[typ] = true
}

func (f *fakeExec) support(typ string, versions ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions[typ] = versions
}

// count returns how many verb calls typ got, held or not.
func (f *fakeExec) count(verb, typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.verb == verb && c.typ == typ {
			n++
		}
	}
	return n
}

// plugged returns the calls other than VERSION.
func (f *fakeExec) plugged() []execCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []execCall
	for _, c := range f.calls {
		if c.verb != "VERSION" {
			out = append(out, c)
		}
	}
	return out
}

// lookupsOf returns how many times FindInPath was asked for plugin. The
// loader looks up every plugin of every parsed file on each load, so the
// lookups of a plugin that only one file uses count the loads.
func (f *fakeExec) lookupsOf(plugin string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[plugin]
}

func (f *fakeExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	c := execCall{typ: filepath.Base(pluginPath), env: map[string]string{}}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CNI_") {
			c.env[k] = v
		}
	}
	c.verb = c.env["CNI_COMMAND"]
	if err := json.Unmarshal(stdin, &c.stdin); err != nil {
		c.stdin = nil // a call with bad stdin is still recorded
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	var gates []*execGate
	for _, g := range f.gates {
		if g.typ == c.typ {
			gates = append(gates, g)
		}
	}
	f.mu.Unlock()
	for _, g := range gates {
		if err := g.hold(ctx); err != nil {
			return nil, err
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	switch c.verb {
	case "VERSION":
		if f.failing[c.typ] {
			return nil, fmt.Errorf("fakeExec: %s: exec format error", c.typ)
		}
		vs := f.versions[c.typ]
		if vs == nil {
			vs = version.All.SupportedVersions()
		}
		return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","supportedVersions":["%s"]}`, strings.Join(vs, `","`))), nil
	case "ADD":
		return []byte(`{"cniVersion":"1.1.0"}`), nil
	}
	return nil, nil
}

func (f *fakeExec) FindInPath(plugin string, paths []string) (string, error) {
	f.mu.Lock()
	f.lookups[plugin]++
	mode, found := f.find, f.only == nil || f.only[plugin]
	f.mu.Unlock()
	switch mode {
	case findUnchecked:
		return filepath.Join(paths[0], plugin), nil
	case findAny:
		if found && len(paths) > 0 {
			return filepath.Join(paths[0], plugin), nil
		}
	default:
		for _, d := range paths {
			p := filepath.Join(d, plugin)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s", plugin, paths)
}

func (f *fakeExec) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

// execGate holds every call of one plugin type until released, like a
// plugin that hangs; see fakeExec.gate.
type execGate struct {
	typ       string
	honourCtx bool
	released  chan struct{}
	once      sync.Once
	entered   chan struct{} // one token per call that reached the gate
}

// gate holds the calls of plugin type typ, from now until release. With
// honourCtx a held call also ends when its context does, as a killed
// plugin would; without, it plays a plugin that ignores cancellation.
// Tests register release with t.Cleanup after the manager, so that it
// runs before the manager's Shutdown waits for calls.
func (f *fakeExec) gate(typ string, honourCtx bool) *execGate {
	g := &execGate{typ: typ, honourCtx: honourCtx, released: make(chan struct{}), entered: make(chan struct{}, 64)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gates = append(f.gates, g)
	return g
}

// release lets the held calls and every later one through; twice is fine.
func (g *execGate) release() { g.once.Do(func() { close(g.released) }) }

func (g *execGate) hold(ctx context.Context) error {
	select {
	case g.entered <- struct{}{}:
	default: // the test waits for fewer calls than this
	}
	if !g.honourCtx {
		<-g.released
		return nil
	}
	select {
	case <-g.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitEntered waits until a call is held at each of the gates.
func waitEntered(t *testing.T, gates ...*execGate) {
	t.Helper()
	deadline := time.After(testenv.BarrierTimeout)
	for _, g := range gates {
		select {
		case <-g.entered:
		case <-deadline:
			require.FailNow(t, "call not held", "no call of %s reached its gate", g.typ)
		}
	}
}

// installPlugin puts an (unrunnable) plugin file into a bin dir.
func installPlugin(t *testing.T, binDir, typ string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(binDir, typ), []byte("#!/bin/false\n"), 0o755))
}

func writeConf(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// conflist returns a network config list with one plugin per type.
func conflist(name, version string, types ...string) string {
	return string(confbuild.Build(name, version, types...))
}

// pluginTypes returns the plugin types of a loaded network, nil if absent.
func pluginTypes(m *Manager, name string) []string {
	n := m.snapshot().Network(name)
	if n == nil {
		return nil
	}
	types := make([]string, 0, len(n.List.Plugins))
	for _, p := range n.List.Plugins {
		types = append(types, p.Network.Type)
	}
	return types
}

// skippedFile returns the skip reason recorded for a file, nil if none.
func skippedFile(m *Manager, path string) error {
	for _, s := range m.Skipped() {
		if s.File == path {
			return s
		}
	}
	return nil
}
