package ocicni

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"
)

// confExtensions are the file types read from the conf dir.
var confExtensions = []string{".conf", ".conflist", ".json"}

// versionTimeout bounds one plugin VERSION call during a reload.
const versionTimeout = 10 * time.Second

// network is one loaded, validated network.
type network struct {
	name   string
	file   string
	list   *libcni.NetworkConfigList
	policy TeardownPolicy // empty: the manager's default
}

// networkSet is an immutable snapshot of the loaded networks. A reload
// builds a new one and swaps it in whole.
type networkSet struct {
	byName      map[string]*network
	defaultName string
	skipped     []*ConfigError // files that were not loaded, in file order
}

// names returns the loaded networks' names, sorted.
func (s *networkSet) names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (s *networkSet) defaultNetwork() *network {
	if s.defaultName == "" {
		return nil
	}
	return s.byName[s.defaultName]
}

// notFound builds the error for a network that is not loaded, with the
// reasons its files were skipped.
func (s *networkSet) notFound(name, confDir string) error {
	e := &NetworkNotFoundError{Network: name, ConfDir: confDir}
	for _, sk := range s.skipped {
		if sk.Network == name {
			e.Skipped = append(e.Skipped, sk)
		}
	}
	return e
}

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
}

// freshWindow is how recently a file may have changed for its parse not
// to be trusted on a later reload: a rewrite of the same size within one
// timestamp tick would otherwise look unchanged.
const freshWindow = 2 * time.Second

// versionEntry is a plugin binary's VERSION answer and the stamp of the
// binary that gave it.
type versionEntry struct {
	stamp fileStamp
	info  version.PluginInfo
}

// loader reads the conf dir. It remembers parsed files and plugin VERSION
// answers, so a reload costs in proportion to what changed.
type loader struct {
	confDir string
	binDirs []string
	fixed   string // the default network's fixed name, if any
	exec    invoke.Exec
	log     *logrus.Entry

	mu       sync.Mutex // serializes reloads; guards files and versions
	files    map[string]*parsedFile
	versions map[string]versionEntry // by binary path
}

func newLoader(o *options, exec invoke.Exec, log *logrus.Entry) *loader {
	return &loader{
		confDir:  o.confDir,
		binDirs:  o.binDirs,
		fixed:    o.defaultNet,
		exec:     exec,
		log:      log,
		files:    make(map[string]*parsedFile),
		versions: make(map[string]versionEntry),
	}
}

// load builds a new network set from the conf dir. Invalid files are
// skipped and recorded; an error is returned only if the dir is unreadable.
func (l *loader) load(ctx context.Context) (*networkSet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()

	paths, err := libcni.ConfFiles(l.confDir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("ocicni: reading conf dir %s: %w", l.confDir, err)
	}
	slices.Sort(paths)

	set := &networkSet{byName: make(map[string]*network)}
	seen := make(map[string]bool, len(paths))
	var firstValid string
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			continue // removed since the listing
		}
		seen[path] = true
		prev := l.files[path]
		pf := prev
		if pf == nil || pf.stamp != stampOf(fi) || time.Since(fi.ModTime()) < freshWindow || subDirExists(pf.subDir) {
			pf = parseFile(path, stampOf(fi))
			if pf.err != nil && prev != nil && errors.Is(pf.err, ErrInvalidConfig) {
				pf.lastGood = prev.list
				if pf.lastGood == nil {
					pf.lastGood = prev.lastGood
				}
			}
			l.files[path] = pf
		}
		set.skipped = append(set.skipped, pf.subSkipped...)
		list := pf.list
		if pf.err != nil {
			if errors.Is(pf.err, fs.ErrNotExist) {
				continue
			}
			set.skipped = append(set.skipped, pf.err)
			if list = pf.lastGood; list == nil {
				continue
			}
		}
		if cerr := l.validate(ctx, path, list); cerr != nil {
			set.skipped = append(set.skipped, cerr)
			continue
		}
		name := list.Name
		if prev, dup := set.byName[name]; dup {
			l.log.WithFields(logrus.Fields{"network": name, "file": path, "loaded": prev.file}).
				Warn("Ignoring duplicate network name; the first file in name order wins")
			continue
		}
		policy, perr := policyFromBytes(list.Bytes)
		if perr != nil {
			set.skipped = append(set.skipped, &ConfigError{File: path, Network: name, Err: perr})
			continue
		}
		set.byName[name] = &network{name: name, file: path, list: list, policy: policy}
		if firstValid == "" {
			firstValid = name
		}
	}
	for path := range l.files {
		if !seen[path] {
			delete(l.files, path)
		}
	}
	set.defaultName = firstValid
	if l.fixed != "" {
		set.defaultName = l.fixed
	}
	return set, nil
}

// validate checks that every plugin binary exists and supports the list's
// version. VERSION answers are remembered per binary path, size and times.
func (l *loader) validate(ctx context.Context, file string, list *libcni.NetworkConfigList) *ConfigError {
	want := list.CNIVersion
	if want == "" {
		want = "0.1.0"
	}
	for _, p := range list.Plugins {
		path, err := l.exec.FindInPath(p.Network.Type, l.binDirs)
		if err != nil {
			return &ConfigError{File: file, Network: list.Name, Err: err}
		}
		info, err := l.versionInfo(ctx, path)
		if err != nil {
			return &ConfigError{File: file, Network: list.Name,
				Err: fmt.Errorf("plugin %q: VERSION failed: %w", p.Network.Type, err)}
		}
		if !slices.Contains(info.SupportedVersions(), want) {
			return &ConfigError{File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s) supports %v, config wants %q",
					ErrUnsupportedVersion, p.Network.Type, path, info.SupportedVersions(), want)}
		}
	}
	return nil
}

// versionInfo returns a plugin's VERSION answer; l.mu must be held.
func (l *loader) versionInfo(ctx context.Context, path string) (version.PluginInfo, error) {
	fi, statErr := os.Stat(path) // fails for a faked exec's paths: then no caching
	if statErr == nil {
		if v, ok := l.versions[path]; ok && v.stamp == stampOf(fi) {
			return v.info, nil
		}
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	info, err := invoke.GetVersionInfo(vctx, path, l.exec)
	if err != nil {
		return nil, err
	}
	if statErr == nil {
		l.versions[path] = versionEntry{stamp: stampOf(fi), info: info}
	}
	return info, nil
}
