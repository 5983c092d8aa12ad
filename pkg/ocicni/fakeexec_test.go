package ocicni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
)

// fakeExec answers VERSION for plugins that exist as files in a bin dir,
// and counts the calls. It is used only for config-loading logic, where no
// plugin runs; everything that touches the kernel uses real plugins.
type fakeExec struct {
	mu       sync.Mutex
	versions map[string][]string // plugin type -> supported versions
	calls    map[string]int      // "VERSION:type" -> count
}

func newFakeExec() *fakeExec {
	return &fakeExec{versions: map[string][]string{}, calls: map[string]int{}}
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
