package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// Cache gives access to one libcni cache directory. Its methods are safe
// for concurrent use: a Cache holds no state but the directory, and every
// method goes to the file system.
type Cache struct {
	dir string
}

// New returns a Cache for dir, or for [libcni.CacheDir] when dir is "".
// A relative dir is made absolute, so that [Entry.Path] is always absolute.
func New(dir string) *Cache {
	if dir == "" {
		dir = libcni.CacheDir
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Cache{dir: filepath.Clean(dir)}
}

// Dir returns the cache directory. The zero Cache uses [libcni.CacheDir].
func (c *Cache) Dir() string {
	if c.dir == "" {
		return libcni.CacheDir
	}
	return c.dir
}

// ResultsDir returns the directory holding libcni's result files,
// <dir>/results.
func (c *Cache) ResultsDir() string {
	return filepath.Join(c.Dir(), "results")
}

// List returns every parseable entry in the results directory, sorted by
// file name. Each unreadable or corrupt file adds one *[EntryError] to the
// returned error, which joins them (errors.Join); the good entries are
// returned as well. A missing results directory yields (nil, nil).
// Subdirectories are ignored.
func (c *Cache) List() ([]*Entry, error) {
	return c.scan(selector{
		name: func(string) (nameHint, bool) { return nameHint{}, true },
	})
}

// ForContainer is [Cache.List] restricted to the entries whose containerId
// is id. Only files whose name splits around "-<id>-" (see
// [SplitFileName]) are read. A corrupt file with such a name is reported
// unless its content names another container; its *[EntryError] takes
// Network, ContainerID and IfName from the file name.
func (c *Cache) ForContainer(id string) ([]*Entry, error) {
	if err := ValidateName(FieldContainerID, id); err != nil {
		return nil, err
	}
	return c.scan(selector{
		name: func(name string) (nameHint, bool) {
			network, ifname, ok := SplitFileName(name, id)
			return nameHint{network: network, id: id, ifname: ifname}, ok
		},
		field: func(e *Entry) string { return e.ContainerID },
		want:  id,
	})
}

// ForNetwork is [Cache.List] restricted to the entries whose networkName is
// name. Only files whose name starts with "<name>-" are read. Because
// network names may contain '-', a corrupt file of network "a-b" is also
// reported by ForNetwork("a") unless its content names the network.
func (c *Cache) ForNetwork(name string) ([]*Entry, error) {
	if err := ValidateName(FieldNetwork, name); err != nil {
		return nil, err
	}
	prefix := name + "-"
	return c.scan(selector{
		name: func(fileName string) (nameHint, bool) {
			ok := strings.HasPrefix(fileName, prefix) && len(fileName) > len(prefix)
			return nameHint{network: name}, ok
		},
		field: func(e *Entry) string { return e.Network },
		want:  name,
	})
}

// Get reads the entry stored in <results>/<network>-<id>-<ifname>, as
// stored: like libcni, it does not compare the content with the file name.
// Every failure is an *[EntryError]; an absent file gives one that matches
// fs.ErrNotExist.
func (c *Cache) Get(network, id, ifname string) (*Entry, error) {
	name, err := FileName(network, id, ifname)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.ResultsDir(), name)
	e, err := readEntry(path)
	if err != nil {
		return nil, entryError(path, nameHint{network, id, ifname}, e, err)
	}
	return e, nil
}

// Remove deletes the entry file of (network, id, ifname). An absent file is
// not an error.
func (c *Cache) Remove(network, id, ifname string) error {
	name, err := FileName(network, id, ifname)
	if err != nil {
		return err
	}
	path := filepath.Join(c.ResultsDir(), name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: path, Network: network, ContainerID: id, IfName: ifname, Err: err}
	}
	return nil
}

// RemoveFile deletes the file at path, typically an [Entry.Path] or an
// [EntryError.Path]. It refuses, with an error matching
// [ErrOutsideResults], any path that is not directly inside
// [Cache.ResultsDir] once made absolute and cleaned. An absent file is not
// an error.
func (c *Cache) RemoveFile(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("cache: remove %s: %w", path, err)
	}
	if filepath.Dir(abs) != filepath.Clean(c.ResultsDir()) {
		return fmt.Errorf("%w: %s", ErrOutsideResults, path)
	}
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: abs, Err: err}
	}
	return nil
}

// nameHint is what a file name says about the entry inside it.
type nameHint struct{ network, id, ifname string }

// selector picks the files a scan reads and the entries it keeps.
type selector struct {
	// name reports whether a file may hold a wanted entry, and what its
	// name says about that entry.
	name func(fileName string) (nameHint, bool)
	// field, when set, returns the entry field that must equal want.
	field func(*Entry) string
	want  string
}

func (c *Cache) scan(sel selector) ([]*Entry, error) {
	dir := c.ResultsDir()
	des, err := os.ReadDir(dir) // sorted by file name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache: list %s: %w", dir, err)
	}
	var (
		entries []*Entry
		errs    []error
	)
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		hint, ok := sel.name(de.Name())
		if !ok {
			continue
		}
		path := filepath.Join(dir, de.Name())
		e, err := readEntry(path)
		if err == nil {
			if sel.field == nil || sel.field(e) == sel.want {
				entries = append(entries, e)
			}
			continue
		}
		if e != nil && sel.field != nil {
			if v := sel.field(e); v != "" && v != sel.want {
				continue // corrupt, but the content says it is not ours
			}
		}
		errs = append(errs, entryError(path, hint, e, err))
	}
	return entries, errors.Join(errs...)
}

// readEntry reads and parses one cache file. It never opens anything but a
// regular file, so a FIFO planted in the directory cannot block it.
func readEntry(path string) (*Entry, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, corruptf("not a regular file (mode %s)", fi.Mode().Type())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseEntry(path, data)
}

// entryError builds the *EntryError for path. Names come from the file name
// first, then from the partial entry e (may be nil), then from splitting the
// file name around a container ID learnt from the content.
func entryError(path string, hint nameHint, e *Entry, err error) *EntryError {
	ee := &EntryError{
		Path:        path,
		Network:     hint.network,
		ContainerID: hint.id,
		IfName:      hint.ifname,
		Err:         err,
	}
	if e != nil {
		fill(&ee.Network, e.Network)
		fill(&ee.ContainerID, e.ContainerID)
		fill(&ee.IfName, e.IfName)
	}
	if ee.ContainerID != "" && (ee.Network == "" || ee.IfName == "") {
		if network, ifname, ok := SplitFileName(filepath.Base(path), ee.ContainerID); ok {
			fill(&ee.Network, network)
			fill(&ee.IfName, ifname)
		}
	}
	return ee
}

func fill(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}
