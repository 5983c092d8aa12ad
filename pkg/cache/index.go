package cache

import (
	"errors"
	"os"
	"slices"
	"sync"
)

// ErrNoIndex is returned by [Cache.IndexResults] where no index can be
// kept (not Linux); the Cache then keeps listing the results directory.
var ErrNoIndex = errors.New("cache: no index of the results directory on this system")

// nameIndex holds the file names of the results directory, kept current
// by inotify, by every container ID that each name could be split around
// (see [SplitFileName]), so that [Cache.ForContainer] reads a sandbox's
// files without listing a directory that may hold thousands. Before each
// lookup it applies the events queued so far: the kernel queues an event
// before the file operation returns, so the lookup sees every file
// created or removed before it began. When it cannot tell (events lost,
// the directory replaced, a read error), the lookup reports so and the
// caller lists the directory, as without an index.
type nameIndex struct {
	mu       sync.Mutex          // guards every field, and the watch's fd
	watch    *dirWatch           // made by the first lookup
	closed   bool                // by Cache.Close
	broken   bool                // no inotify instance could be had
	watching bool                // the names below mirror the directory
	byID     map[string][]string // candidate container ID -> names
	names    map[string]bool     // every file name
}

func newNameIndex() *nameIndex {
	return &nameIndex{byID: map[string][]string{}, names: map[string]bool{}}
}

// lookup returns the sorted file names that could hold entries of
// container id, and false when the index cannot answer.
func (x *nameIndex) lookup(dir, id string) ([]string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || x.broken {
		return nil, false
	}
	if x.watch == nil {
		// Made at first use, so that a Cache that never looks a container
		// up holds no inotify instance (a user has 128 by default).
		w, err := newDirWatch()
		if err != nil {
			x.broken = true
			return nil, false
		}
		x.watch = w
	}
	if !x.watching && !x.start(dir) {
		return nil, false
	}
	if !x.watch.drain(x) {
		x.reset()
		return nil, false
	}
	names := slices.Clone(x.byID[id])
	slices.Sort(names)
	return names, true
}

// start watches dir and reads its names. The watch comes first, so that
// a file created or removed during the read has its event queued.
func (x *nameIndex) start(dir string) bool {
	if !x.watch.add(dir) {
		return false
	}
	names, ok := readFileNames(dir)
	if !ok {
		x.watch.remove()
		return false
	}
	for _, n := range names {
		x.add(n)
	}
	x.watching = true
	return true
}

// reset forgets the names and the watch; the next lookup starts again.
func (x *nameIndex) reset() {
	x.watch.remove()
	x.watching = false
	clear(x.byID)
	clear(x.names)
}

func (x *nameIndex) add(name string) {
	if x.names[name] {
		return
	}
	x.names[name] = true
	for _, id := range candidateIDs(name) {
		x.byID[id] = append(x.byID[id], name)
	}
}

func (x *nameIndex) remove(name string) {
	if !x.names[name] {
		return
	}
	delete(x.names, name)
	for _, id := range candidateIDs(name) {
		names := slices.DeleteFunc(x.byID[id], func(n string) bool { return n == name })
		if len(names) == 0 {
			delete(x.byID, id)
		} else {
			x.byID[id] = names
		}
	}
}

func (x *nameIndex) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	if x.watch == nil {
		return nil
	}
	err := x.watch.close()
	x.watch, x.watching = nil, false
	clear(x.byID)
	clear(x.names)
	return err
}

// candidateIDs returns, once each, every container ID that name could be
// split around as <network>-<id>-<ifname>: each run between two dashes
// that leaves a non-empty network and ifname, as [SplitFileName] splits.
func candidateIDs(name string) []string {
	var dashes []int
	for i := 1; i < len(name)-1; i++ {
		if name[i] == '-' {
			dashes = append(dashes, i)
		}
	}
	var out []string
	for a, i := range dashes {
		for _, j := range dashes[a+1:] {
			if j > i+1 {
				out = append(out, name[i+1:j])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readFileNames returns the names of the files (not directories) in dir.
func readFileNames(dir string) ([]string, bool) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		if !de.IsDir() {
			names = append(names, de.Name())
		}
	}
	return names, true
}
