package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/containernetworking/cni/libcni"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// MaxFileSize bounds the cache entries and order records this package
// reads. libcni's entries are a few kB; a larger file is reported as
// corrupt instead of being read into memory.
const MaxFileSize = 4 << 20

// Cache gives access to one libcni cache directory. Its methods are safe
// for concurrent use: a Cache holds no state but the directory, the
// retired order records it reuses and, after [Cache.IndexResults], an
// index of the results directory's file names; every method goes to the
// file system.
type Cache struct {
	dir    string
	spares *fsutil.Spares // nil in the zero Cache, which reuses no record
	warm   *warmConfigs   // nil in the zero Cache, which keeps no unlinked config

	indexMu sync.Mutex
	index   *nameIndex // nil: ForContainer lists the results directory
}

// IndexResults makes [Cache.ForContainer] find a container's files in an
// index of the results directory's names, kept current with inotify,
// instead of listing a directory that holds an entry for every
// attachment on the node. What it returns is the same. The index is made
// at the first lookup. Where none can be kept it returns an error
// matching [ErrNoIndex] (not Linux), and ForContainer keeps listing; so
// does a lookup that finds the index unsure (events lost, the directory
// replaced), which rebuilds it, and every lookup when no inotify instance
// could be had. [Cache.Close] ends it. Calling it twice is fine.
func (c *Cache) IndexResults() error {
	if !indexSupported {
		return ErrNoIndex
	}
	c.indexMu.Lock()
	defer c.indexMu.Unlock()
	if c.index == nil {
		c.index = newNameIndex()
	}
	return nil
}

// Close releases the index of [Cache.IndexResults], if any; the Cache
// keeps working, listing the results directory.
func (c *Cache) Close() error {
	c.indexMu.Lock()
	x := c.index
	c.index = nil
	c.indexMu.Unlock()
	if x == nil {
		return nil
	}
	return x.close()
}

func (c *Cache) nameIndex() *nameIndex {
	c.indexMu.Lock()
	defer c.indexMu.Unlock()
	return c.index
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
	return &Cache{dir: filepath.Clean(dir), spares: fsutil.NewSpares(fsutil.NewRoot(dir)), warm: newWarmConfigs()}
}

// root is the cache dir as the methods that write or remove reach it:
// never through a symlink below it (see [Cache.CheckState]).
func (c *Cache) root() fsutil.Root { return fsutil.NewRoot(c.Dir()) }

// Dir returns the cache directory. The zero Cache uses [libcni.CacheDir].
func (c *Cache) Dir() string {
	if c.dir == "" {
		return libcni.CacheDir
	}
	return c.dir
}

// The directories below [Cache.Dir] that the cache writes in or removes
// from: libcni's results, and the library's state.
var (
	resultsRel = "results"
	ordersRel  = filepath.Join("ocicni", "attachments")
	configsRel = filepath.Join("ocicni", "configs")
	stateDirs  = []string{resultsRel, ordersRel, configsRel, filepath.Join("ocicni", "locks"), filepath.Join("ocicni", "aside")}
)

// CheckState reports whether the directories below [Cache.Dir] that the
// cache writes in or removes from (results/ and the library's state
// under ocicni/) are reached without a symlink: a component that is one,
// such as an ocicni/ linked to a directory elsewhere, gets an error
// matching [ErrSymlinkedState] that names it. Every method that writes
// or removes refuses with it too, whenever the link appears: each reaches
// its directory from the cache dir without following a symlink
// (openat2(2) with RESOLVE_NO_SYMLINKS, or O_NOFOLLOW per component) and
// acts on the file relative to it, so nothing is ever written or removed
// through a link. The cache dir itself may be a symlink.
func (c *Cache) CheckState() error { return c.checkState(stateDirs...) }

// checkState is [Cache.CheckState] for the directories a method uses
// alone, so that a method that makes several changes refuses before the
// first.
func (c *Cache) checkState(rels ...string) error {
	dirs := make([]string, len(rels))
	for i, rel := range rels {
		dirs[i] = filepath.Join(c.Dir(), rel)
	}
	return c.root().Check(dirs...)
}

// ResultsDir returns the directory holding libcni's result files,
// <dir>/results.
func (c *Cache) ResultsDir() string {
	return filepath.Join(c.Dir(), "results")
}

// Listing is what a scan of the results directory found, both sorted by
// file name.
type Listing struct {
	// Entries are the files that parsed.
	Entries []*Entry
	// Corrupt are the files that could not be read or parsed, one
	// *[EntryError] each: errors.Is with [ErrCorruptEntry] tells
	// corruption from read failures.
	Corrupt []*EntryError
}

// List returns every entry in the results directory, parseable or not; a
// scan never stops at a bad file. The error is for failures that stop the
// listing itself. A missing results directory yields an empty Listing.
// Subdirectories are ignored, and so is a file removed between the read
// of the directory and its own (a DEL that ran meanwhile).
func (c *Cache) List() (Listing, error) {
	return c.scan(selector{
		match: func(string) bool { return true },
	})
}

// ForContainer is [Cache.List] restricted to the entries whose containerId
// is id. Only files whose name splits around "-<id>-" (see
// [SplitFileName]) are read. A corrupt file with such a name is reported
// unless its content names another container; its *[EntryError] takes
// Network, ContainerID and IfName from the file name (see
// [ParseFileName]).
func (c *Cache) ForContainer(id string) (Listing, error) {
	if err := ValidateContainerID(id); err != nil {
		return Listing{}, err
	}
	sel := selector{
		match: func(name string) bool {
			_, _, ok := SplitFileName(name, id)
			return ok
		},
		id:    id,
		field: func(e *Entry) string { return e.ContainerID },
		want:  id,
	}
	if x := c.nameIndex(); x != nil {
		if names, ok := x.lookup(c.ResultsDir(), id); ok {
			var l Listing
			for _, name := range names {
				if sel.match(name) {
					sel.read(&l, filepath.Join(c.ResultsDir(), name))
				}
			}
			return l, nil
		}
	}
	return c.scan(sel)
}

// Get reads the entry stored in <results>/<network>-<id>-<ifname>. Unlike
// libcni it requires the content to agree with the file name (see
// [Cache.List]). Every failure is an *[EntryError]; an absent file gives
// one that matches fs.ErrNotExist.
func (c *Cache) Get(network, id, ifname string) (*Entry, error) {
	name, err := FileName(network, id, ifname)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.ResultsDir(), name)
	e, err := readEntry(path)
	if err != nil {
		return nil, entryError(path, id, e, err)
	}
	return e, nil
}

// Remove deletes the entry file of (network, id, ifname). An absent file is
// not an error.
func (c *Cache) Remove(network, id, ifname string) error {
	if err := c.checkState(resultsRel); err != nil {
		return err
	}
	name, err := FileName(network, id, ifname)
	if err != nil {
		return err
	}
	path := filepath.Join(c.ResultsDir(), name)
	if err := c.root().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	if err := c.checkState(resultsRel); err != nil {
		return err
	}
	abs, err := c.inResults("remove", path)
	if err != nil {
		return err
	}
	if err := c.root().Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: abs, Err: err}
	}
	return nil
}

// Exists reports whether the results file at path, typically an
// [Entry.Path] or an [EntryError.Path], still exists. Like
// [Cache.RemoveFile] it refuses, with an error matching
// [ErrOutsideResults], any path that is not directly inside
// [Cache.ResultsDir]. It follows no symlink.
func (c *Cache) Exists(path string) (bool, error) {
	abs, err := c.inResults("stat", path)
	if err != nil {
		return false, err
	}
	_, err = c.root().Lstat(abs)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, &EntryError{Path: abs, Err: err}
	}
}

// inResults returns path made absolute and cleaned, or an error matching
// [ErrOutsideResults] when it is not directly inside [Cache.ResultsDir].
// op names the caller's operation in the error.
func (c *Cache) inResults(op, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("cache: %s %s: %w", op, path, err)
	}
	if filepath.Dir(abs) != filepath.Clean(c.ResultsDir()) {
		return "", fmt.Errorf("%w: %s", ErrOutsideResults, path)
	}
	return abs, nil
}

// selector picks the files a scan reads and the entries it keeps.
type selector struct {
	// match reports whether a file may hold a wanted entry.
	match func(fileName string) bool
	// id is the container ID the scan is for, if any; it splits the names
	// of corrupt files.
	id string
	// field, when set, returns the entry field that must equal want.
	field func(*Entry) string
	want  string
}

func (c *Cache) scan(sel selector) (Listing, error) {
	dir := c.ResultsDir()
	des, err := os.ReadDir(dir) // sorted by file name
	if errors.Is(err, fs.ErrNotExist) {
		return Listing{}, nil
	}
	if err != nil {
		return Listing{}, fmt.Errorf("cache: list %s: %w", dir, err)
	}
	var l Listing
	for _, de := range des {
		if !de.IsDir() && sel.match(de.Name()) {
			sel.read(&l, filepath.Join(dir, de.Name()))
		}
	}
	return l, nil
}

// read reads the file at path into l, as an entry or as a corrupt one, or
// not at all when it is not wanted.
func (sel *selector) read(l *Listing, path string) {
	e, err := readEntry(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return // removed since the directory was read: a concurrent DEL
	case err == nil:
		if sel.field == nil || sel.field(e) == sel.want {
			l.Entries = append(l.Entries, e)
		}
		return
	case e != nil && sel.field != nil:
		if v := sel.field(e); v != "" && v != sel.want && ValidateContainerID(v) == nil {
			return // corrupt, but the content says it is not ours
		}
	}
	l.Corrupt = append(l.Corrupt, entryError(path, sel.id, e, err))
}

// readEntry reads and parses one cache file. It opens nothing but a
// regular file, never a symlink (libcni writes none), never blocks on a
// FIFO planted in the directory, and reads at most [MaxFileSize] bytes;
// anything else is a corrupt entry.
func readEntry(path string) (*Entry, error) {
	data, err := fsutil.ReadRegular(path, MaxFileSize, false)
	switch {
	case errors.Is(err, fsutil.ErrNotRegular) || errors.Is(err, fsutil.ErrTooLarge):
		return nil, corrupt(err)
	case err != nil:
		return nil, err
	}
	return parseEntry(path, data)
}

// entryError builds the *EntryError for path. Its names come only from the
// file name, split around id (the scan's container ID, else the one the
// partial entry e names) and validated with [ParseFileName]: names in the
// content of a corrupt file are never trusted, so that acting on the
// EntryError's names touches this very file and nothing else.
func entryError(path, id string, e *Entry, err error) *EntryError {
	ee := &EntryError{Path: path, Err: err}
	if id == "" && e != nil {
		id = e.ContainerID
	}
	if network, ifname, ok := ParseFileName(path, id); ok {
		ee.Network, ee.ContainerID, ee.IfName = network, id, ifname
	}
	return ee
}
