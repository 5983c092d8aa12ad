package fakecni

import (
	"fmt"
	"os"
	"path/filepath"
)

// FindMode is how [Exec.FindInPath] finds a plugin; see
// [Exec.SetFindMode].
type FindMode int

const (
	// FindAny finds every plugin type with a plain file name under the
	// first path, without looking at the disk. It is the default.
	FindAny FindMode = iota
	// FindOnDisk finds a plugin as libcni's default executor does: in
	// the first path that holds a file of its name. The file is never
	// run, so an empty one will do; a test installs and removes plugins
	// by writing and removing files.
	FindOnDisk
	// FindUnchecked joins any plugin name to the first path without
	// looking and without refusing names that are not plain file names
	// ("../x", "a/b", "/abs"), as a careless executor would. A test of
	// the manager's own checks on plugin types uses it.
	FindUnchecked
)

// SetFindMode sets how FindInPath finds plugins (by default [FindAny]).
// [Exec.OnlyPlugins] applies in every mode.
func (f *Exec) SetFindMode(mode FindMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.find = mode
}

// Lookups returns how many times FindInPath was asked for plugin, found
// or not, since the Exec was made or [Exec.ResetCalls].
func (f *Exec) Lookups(plugin string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups[plugin]
}

// FindInPath returns where plugin is, as the [FindMode] says: by default
// <first path>/<plugin> for every plugin type that
// [Exec.OnlyPlugins] lets it find, without looking at the disk.
// Every call is counted ([Exec.Lookups]).
func (f *Exec) FindInPath(plugin string, paths []string) (string, error) {
	f.mu.Lock()
	f.lookups[plugin]++
	mode, found := f.find, f.only == nil || f.only[plugin]
	f.mu.Unlock()
	notFound := fmt.Errorf("failed to find plugin %q in path %s", plugin, paths)
	if len(paths) == 0 {
		return "", fmt.Errorf("no paths provided")
	}
	if !found || plugin == "" || mode != FindUnchecked && plugin != filepath.Base(plugin) {
		return "", notFound
	}
	if mode != FindOnDisk {
		return filepath.Join(paths[0], plugin), nil
	}
	for _, d := range paths {
		p := filepath.Join(d, plugin)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", notFound
}
