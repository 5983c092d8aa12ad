package netconf

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// confExtensions are the file types read from the conf dir.
var confExtensions = []string{".conf", ".conflist", ".json"}

// freshWindow is how recently a file may have changed for its parse not
// to be trusted by a later load: a rewrite of the same size within one
// timestamp tick would otherwise look unchanged.
const freshWindow = 2 * time.Second

// parsedFile is the remembered parse of one config file, so that a load
// costs in proportion to what changed.
type parsedFile struct {
	stamp fileStamp
	list  *libcni.NetworkConfigList
	err   *ConfigError
	// lastGood is the file's last valid parse, kept while the file is
	// invalid (for example half-written by a non-atomic writer).
	lastGood *libcni.NetworkConfigList
	// subDir is the list's plugin sub-folder ("" when none is read), and
	// subSkipped the files there that were not read.
	subDir     string
	subSkipped []*ConfigError
	// data is a config held in memory's bytes, to tell whether it changed
	// (a file's stamp tells that); nil for a file.
	data []byte
}

// scan is one read of the source (the conf dir, or the configs held in
// memory): the files in name order, or the configs in their order, and
// the plugin binaries their lists use, by type.
type scan struct {
	gen         uint64
	provisional bool
	files       []scannedFile
	bins        map[string]*binary
}

type scannedFile struct {
	path    string                    // the file's path, or the name of a config held in memory
	list    *libcni.NetworkConfigList // the list to validate; nil when none
	skips   []*ConfigError
	readErr *ConfigError // why the file could not be read or parsed; nil when it was
}

// binary is where a plugin type was found, and its VERSION call.
type binary struct {
	path    string
	err     error
	version *versionEntry // nil when not found
}

// readConfig is one config that a scan read, and its parse.
type readConfig struct {
	name   string // the file's path, or the name of a config held in memory
	parsed *parsedFile
}

// scan lists and parses the source, re-parsing only what changed, and
// starts the VERSION calls of the plugins the configs use. Files and
// configs held in memory are read differently (readDir, readMemory) and
// then go through the same steps: here, in assemble and in publish.
func (l *Loader) scan(ctx context.Context) (*scan, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()

	var read []readConfig
	if l.memory != nil {
		read = l.readMemory()
	} else {
		var err error
		if read, err = l.readDir(); err != nil {
			return nil, err
		}
	}
	l.gen++
	s := &scan{gen: l.gen, bins: make(map[string]*binary)}
	seen := make(map[string]bool, len(read))
	for _, r := range read {
		seen[r.name] = true
		pf := r.parsed
		f := scannedFile{path: r.name, list: pf.list, skips: slices.Clone(pf.subSkipped)}
		if pf.err != nil {
			f.skips = append(f.skips, pf.err)
			f.list = pf.lastGood
			f.readErr = pf.err
		}
		s.files = append(s.files, f)
		if f.list != nil {
			l.findBinaries(s, f.list)
		}
	}
	for name := range l.files {
		if !seen[name] {
			delete(l.files, name)
		}
	}
	return s, nil
}

// readDir lists the conf dir and parses its files in name order,
// re-parsing only changed files; l.lock must be held.
func (l *Loader) readDir() ([]readConfig, error) {
	paths, err := libcni.ConfFiles(l.confDir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("ocicni: reading conf dir %s: %w", l.confDir, err)
	}
	slices.Sort(paths)
	read := make([]readConfig, 0, len(paths))
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			continue // removed since the listing
		}
		pf := l.parsed(path, fi)
		if pf.err != nil && errors.Is(pf.err, fs.ErrNotExist) {
			continue
		}
		read = append(read, readConfig{name: path, parsed: pf})
	}
	return read, nil
}

// findBinaries finds the binaries of list's plugin types that s has not
// found yet, and starts (or reuses) their VERSION calls.
func (l *Loader) findBinaries(s *scan, list *libcni.NetworkConfigList) {
	for _, p := range list.Plugins {
		typ := p.Network.Type
		if s.bins[typ] != nil {
			continue
		}
		b := &binary{}
		b.path, b.err = l.exec.FindInPath(typ, l.binDirs)
		switch {
		case b.err == nil:
			b.version = l.versions.get(b.path)
		case !errors.Is(b.err, ErrPluginNotFound): // package ocicni's executor wraps it already
			b.err = fmt.Errorf("%w: %q in %v: %w", ErrPluginNotFound, typ, l.binDirs, b.err)
		}
		s.bins[typ] = b
	}
}

// parsed returns the parse of the file at path, from the cache when
// neither the file nor its plugin sub-folder may have changed; l.lock must
// be held.
func (l *Loader) parsed(path string, fi fs.FileInfo) *parsedFile {
	prev := l.files[path]
	stamp := stampOf(fi)
	if prev != nil && prev.stamp == stamp && time.Since(fi.ModTime()) >= freshWindow && !subDirExists(prev.subDir) {
		return prev
	}
	pf := parseFile(path, stamp)
	if pf.err != nil && prev != nil && errors.Is(pf.err, ErrInvalidConfig) {
		pf.lastGood = prev.list
		if pf.lastGood == nil {
			pf.lastGood = prev.lastGood
		}
	}
	l.files[path] = pf
	return pf
}
