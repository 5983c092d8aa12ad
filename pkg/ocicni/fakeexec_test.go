package ocicni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
)

// fakeExec answers VERSION for plugins that exist as files in a bin dir,
// and counts the calls. It is used only for config-loading logic, where no
// plugin runs; everything that touches the kernel uses real plugins.
type fakeExec struct {
	mu       sync.Mutex
	versions map[string][]string // plugin type -> supported versions
	failing  map[string]bool     // plugin type -> VERSION fails
	calls    map[string]int      // "VERSION:type" -> count
}

func newFakeExec() *fakeExec {
	return &fakeExec{versions: map[string][]string{}, failing: map[string]bool{}, calls: map[string]int{}}
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

func (f *fakeExec) count(verb, typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[verb+":"+typ]
}

func (f *fakeExec) ExecPlugin(_ context.Context, pluginPath string, _ []byte, environ []string) ([]byte, error) {
	verb := ""
	for _, e := range environ {
		if v, ok := strings.CutPrefix(e, "CNI_COMMAND="); ok {
			verb = v
		}
	}
	typ := filepath.Base(pluginPath)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[verb+":"+typ]++
	if verb != "VERSION" {
		return nil, fmt.Errorf("fakeExec: unexpected %s", verb)
	}
	if f.failing[typ] {
		return nil, fmt.Errorf("fakeExec: %s: exec format error", typ)
	}
	vs := f.versions[typ]
	if vs == nil {
		vs = version.All.SupportedVersions()
	}
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","supportedVersions":["%s"]}`, strings.Join(vs, `","`))), nil
}

func (f *fakeExec) FindInPath(plugin string, paths []string) (string, error) {
	for _, d := range paths {
		p := filepath.Join(d, plugin)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s", plugin, paths)
}

func (f *fakeExec) Decode(b []byte) (version.PluginInfo, error) {
	dec := &version.PluginDecoder{}
	return dec.Decode(b)
}

// gatedExec holds the VERSION calls of chosen plugin types until the test
// opens their gate, like a plugin that hangs; other calls go straight to
// the fakeExec. Each held call is announced on entered. With honourCtx a
// held call also ends when its context does, as a killed plugin would.
type gatedExec struct {
	*fakeExec
	honourCtx bool
	entered   chan string
	gates     map[string]chan struct{} // fixed at construction
	openOnce  map[string]*sync.Once

	mu    sync.Mutex
	calls map[string]int // plugin type -> VERSION calls, held or not
}

func newGatedExec(f *fakeExec, honourCtx bool, types ...string) *gatedExec {
	g := &gatedExec{
		fakeExec: f, honourCtx: honourCtx, entered: make(chan string, 64),
		gates: map[string]chan struct{}{}, openOnce: map[string]*sync.Once{}, calls: map[string]int{},
	}
	for _, typ := range types {
		g.gates[typ] = make(chan struct{})
		g.openOnce[typ] = &sync.Once{}
	}
	return g
}

// open lets the held and future VERSION calls of typ answer.
func (g *gatedExec) open(typ string) {
	g.openOnce[typ].Do(func() { close(g.gates[typ]) })
}

// openAll opens every gate; tests register it with t.Cleanup after the
// manager, so that it runs before the manager's Shutdown waits for calls.
func (g *gatedExec) openAll() {
	for typ := range g.gates {
		g.open(typ)
	}
}

func (g *gatedExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	typ := filepath.Base(pluginPath)
	g.mu.Lock()
	g.calls[typ]++
	g.mu.Unlock()
	if gate := g.gates[typ]; gate != nil {
		g.entered <- typ
		if g.honourCtx {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			<-gate
		}
	}
	return g.fakeExec.ExecPlugin(ctx, pluginPath, stdin, environ)
}

// count returns how many VERSION calls typ got.
func (g *gatedExec) count(typ string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[typ]
}

// waitEntered waits until the VERSION calls of the given types are held.
func (g *gatedExec) waitEntered(t *testing.T, types ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, typ := range types {
		want[typ] = true
	}
	deadline := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case typ := <-g.entered:
			delete(want, typ)
		case <-deadline:
			require.FailNow(t, "VERSION calls not started", "still waiting for %v", want)
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

func conflist(name, version string, types ...string) string {
	plugins := make([]string, len(types))
	for i, t := range types {
		plugins[i] = fmt.Sprintf(`{"type":%q}`, t)
	}
	return fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s]}`, version, name, strings.Join(plugins, ","))
}

// pluginTypes returns the plugin types of a loaded network, nil if absent.
func pluginTypes(m *Manager, name string) []string {
	n := m.snapshot().byName[name]
	if n == nil {
		return nil
	}
	types := make([]string, 0, len(n.list.Plugins))
	for _, p := range n.list.Plugins {
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
