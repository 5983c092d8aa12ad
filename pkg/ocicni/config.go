package ocicni

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/sirupsen/logrus"
)

// confExtensions are the file types read from the conf dir.
var confExtensions = []string{".conf", ".conflist", ".json"}

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
	// unconfirmed holds the skips of files that a provisional load could
	// not read or parse, and that the set before it had not warned about:
	// they are logged at Debug only, until a later load confirms them.
	unconfirmed map[*ConfigError]bool
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

// pending reports whether name is missing only because a plugin has not
// answered VERSION yet.
func (s *networkSet) pending(name string) bool {
	if s.byName[name] != nil {
		return false
	}
	for _, sk := range s.skipped {
		if sk.Network == name && errors.Is(sk, ErrVersionPending) {
			return true
		}
	}
	return false
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

// loader reads the conf dir. It remembers parsed files and plugin VERSION
// answers, so a reload costs in proportion to what changed.
//
// A load reads and parses the files with the lock held, waits for the
// VERSION answers of their plugins without it, and takes it again to
// publish the new set, unless a load that read the conf dir later has
// published already. So no lock is held while a plugin runs, and a slow
// load never overwrites a newer set.
type loader struct {
	confDir  string
	binDirs  []string
	fixed    string // the default network's fixed name, if any
	exec     invoke.Exec
	log      *logrus.Entry
	wait     time.Duration // how long a load waits for VERSION answers
	versions *versionCache
	publish  func(*networkSet) // called with the lock held

	// lock is a 1-slot semaphore, so that waiting for it respects the
	// context. It guards the fields below. Lock order: the loader's lock,
	// then versionCache.mu, then the manager's reloader.mu (in publish).
	lock      chan struct{}
	files     map[string]*parsedFile
	gen       uint64      // loads that have read the conf dir
	published uint64      // gen of the load that published last
	last      *networkSet // the set published last
}

func newLoader(o *options, exec invoke.Exec, log *logrus.Entry, versions *versionCache, publish func(*networkSet)) *loader {
	return &loader{
		confDir:  o.confDir,
		binDirs:  o.binDirs,
		fixed:    o.defaultNet,
		exec:     exec,
		log:      log,
		wait:     o.versionWait,
		versions: versions,
		publish:  publish,
		lock:     make(chan struct{}, 1),
		files:    make(map[string]*parsedFile),
		last:     &networkSet{byName: map[string]*network{}},
	}
}

func (l *loader) acquire(ctx context.Context) error {
	select {
	case l.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *loader) release() { <-l.lock }

// scan is one read of the conf dir: the files in name order, and the
// plugin binaries their lists use, by type.
type scan struct {
	gen         uint64
	provisional bool
	files       []scannedFile
	bins        map[string]*binary
}

type scannedFile struct {
	path    string
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

// load builds a new network set from the conf dir and publishes it.
// Invalid files are skipped and recorded; an error is returned only if
// the dir is unreadable or ctx ends first. ctx bounds the waits only:
// VERSION calls run under a context of their own, bounded by their
// timeout, which neither a caller nor Shutdown cancels.
//
// A provisional load is the watcher's first reload of a burst of events,
// which may read a file that its writer has created but not yet written.
// The new skips of files that it cannot read or parse stay unconfirmed
// (see networkSet.unconfirmed); the watcher's next reload confirms them.
func (l *loader) load(ctx context.Context, provisional bool) error {
	s, err := l.scan(ctx)
	if err != nil {
		return err
	}
	s.provisional = provisional
	waitFor := make([]*versionEntry, 0, len(s.bins))
	for _, b := range s.bins {
		if b.version != nil {
			waitFor = append(waitFor, b.version)
		}
	}
	if err := waitVersions(ctx, waitFor, l.wait); err != nil {
		return err
	}
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	if s.gen <= l.published {
		return nil // a load that read the conf dir later has published
	}
	set := l.assemble(s)
	l.published, l.last = s.gen, set
	l.publish(set)
	return nil
}

// scan lists and parses the conf dir, re-parsing only changed files, and
// starts the VERSION calls of the plugins the files use.
func (l *loader) scan(ctx context.Context) (*scan, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()

	paths, err := libcni.ConfFiles(l.confDir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("ocicni: reading conf dir %s: %w", l.confDir, err)
	}
	slices.Sort(paths)
	l.gen++
	s := &scan{gen: l.gen, bins: make(map[string]*binary)}
	seen := make(map[string]bool, len(paths))
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			continue // removed since the listing
		}
		seen[path] = true
		pf := l.parsed(path, fi)
		f := scannedFile{path: path, list: pf.list, skips: slices.Clone(pf.subSkipped)}
		if pf.err != nil {
			if errors.Is(pf.err, fs.ErrNotExist) {
				continue
			}
			f.skips = append(f.skips, pf.err)
			f.list = pf.lastGood
			f.readErr = pf.err
		}
		s.files = append(s.files, f)
		if f.list == nil {
			continue
		}
		for _, p := range f.list.Plugins {
			typ := p.Network.Type
			if s.bins[typ] != nil {
				continue
			}
			b := &binary{}
			if b.path, b.err = l.exec.FindInPath(typ, l.binDirs); b.err == nil {
				b.version = l.versions.get(b.path)
			}
			s.bins[typ] = b
		}
	}
	for path := range l.files {
		if !seen[path] {
			delete(l.files, path)
		}
	}
	return s, nil
}

// parsed returns the parse of the file at path, from the cache when
// neither the file nor its plugin sub-folder may have changed; l.lock must
// be held.
func (l *loader) parsed(path string, fi fs.FileInfo) *parsedFile {
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

// assemble builds the network set from a scan whose VERSION calls have
// answered or been waited for; l.lock must be held. A file whose plugins
// have not answered yet keeps the network it had in the last set.
func (l *loader) assemble(s *scan) *networkSet {
	lastByFile := make(map[string]*network, len(l.last.byName))
	for _, n := range l.last.byName {
		lastByFile[n.file] = n
	}
	set := &networkSet{byName: make(map[string]*network)}
	var firstValid string
	for _, f := range s.files {
		set.skipped = append(set.skipped, f.skips...)
		if s.provisional && f.readErr != nil && !l.last.warned(f.readErr) {
			if set.unconfirmed == nil {
				set.unconfirmed = make(map[*ConfigError]bool)
			}
			set.unconfirmed[f.readErr] = true
		}
		list := f.list
		if list == nil {
			continue
		}
		if cerr := l.validate(s, f.path, list); cerr != nil {
			set.skipped = append(set.skipped, cerr)
			last := lastByFile[f.path]
			if !errors.Is(cerr, ErrVersionPending) || last == nil {
				continue
			}
			list = last.list
		}
		name := list.Name
		if prev, dup := set.byName[name]; dup {
			l.log.WithFields(logrus.Fields{"network": name, "file": f.path, "loaded": prev.file}).
				Warn("Ignoring duplicate network name; the first file in name order wins")
			continue
		}
		policy, perr := policyFromBytes(list.Bytes)
		if perr != nil {
			set.skipped = append(set.skipped, &ConfigError{File: f.path, Network: name, Err: perr})
			continue
		}
		set.byName[name] = &network{name: name, file: f.path, list: list, policy: policy}
		if firstValid == "" {
			firstValid = name
		}
	}
	set.defaultName = firstValid
	if l.fixed != "" {
		set.defaultName = l.fixed
	}
	return set
}

// validate checks that every plugin binary exists, has answered VERSION,
// and supports the list's version.
func (l *loader) validate(s *scan, file string, list *libcni.NetworkConfigList) *ConfigError {
	want := list.CNIVersion
	if want == "" {
		want = "0.1.0"
	}
	for _, p := range list.Plugins {
		typ := p.Network.Type
		b := s.bins[typ] // scan resolved every type of every list it kept
		if b.err != nil {
			return &ConfigError{File: file, Network: list.Name, Err: b.err}
		}
		if !l.versions.abandon(b.version) {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s) has not answered within %v; the network loads when it does",
					ErrVersionPending, typ, b.path, l.wait),
			}
		}
		if err := b.version.err; err != nil {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("plugin %q (%s): %w", typ, b.path, err),
			}
		}
		if supported := b.version.info.SupportedVersions(); !slices.Contains(supported, want) {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s) supports %v, config wants %q",
					ErrUnsupportedVersion, typ, b.path, supported, want),
			}
		}
	}
	return nil
}
