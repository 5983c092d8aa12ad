package ocicni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	confbuild "github.com/seed-671fdd43/ocicni/internal/conflist"
)

// installPlugin puts an (unrunnable) plugin file into a bin dir, for a
// fakecni.Exec that finds plugins on disk.
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
	n := m.e.snapshot().Network(name)
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
