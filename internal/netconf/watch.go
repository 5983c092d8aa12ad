package netconf

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

const (
	// maxLoadDelay caps how long a continuous stream of events can
	// postpone a load.
	maxLoadDelay = time.Second
	// settleDelay is how long the events of a burst must pause before its
	// first trailing load: the steps of one change (write after truncate,
	// rename after write, a symlink swapped after its target was made)
	// come microseconds to a millisecond apart.
	settleDelay = 3 * time.Millisecond
	// resyncInterval is how often the watcher re-checks that its watches
	// are in place, in case an event was lost.
	resyncInterval = 30 * time.Second
	// missingPoll is how often the watcher syncs while the conf dir is
	// missing. A watch can be added to an ancestor that is being removed
	// (RemoveAll of a tree that is made again at once); it is dead, gets no
	// event of the new tree, and nothing above it is watched. The poll
	// bounds that wait, at the cost of a few stats a second while a node
	// has no conf dir.
	missingPoll = time.Second
	// maxSyncPasses bounds the passes of one [watcher.sync], so that dirs
	// made and removed without end cannot hold the watcher goroutine. A
	// sync needs one pass per missing level of a target's path, and one
	// more.
	maxSyncPasses = 64
)

// watcher runs a load when the conf dir or a bin dir changes. Each target
// dir is watched when it exists, and so is its parent (or nearest existing
// ancestor), so that a dir created late, or deleted and recreated, is
// picked up. Every sub-folder of the conf dir is watched too: a network's
// plugin sub-folder <confdir>/<name>/ adds plugins to it. So is the
// directory of each file that a symlinked config leads to, so that a
// change of that file counts.
//
// The first event of a burst loads at once, and the events that follow
// within the debounce window are gathered into one trailing load (see
// [debouncer]). The leading load and the burst's first trailing load are
// provisional: they log a new file that they cannot read or parse at
// Debug only, since the file may be half-written, and make a trailing
// load due a window later, which logs the file at Warn if it is still
// unusable.
type watcher struct {
	confDir string
	targets []string // the conf dir and the bin dirs
	// load runs one load, provisional or not, and reports whether
	// the set published last holds unconfirmed skips.
	load func(ctx context.Context, provisional bool) (unconfirmed bool)
	log  *logrus.Entry
	// fsw is nil while no fsnotify watcher can be made (see poll.go);
	// newFSW makes one (fsnotify.NewWatcher; tests replace it), and
	// fswErr is why the last try failed.
	fsw     *fsnotify.Watcher
	newFSW  func() (*fsnotify.Watcher, error)
	fswErr  error
	wrapAdd func(func(string) error) func(string) error // wraps addWatch; nil: none (tests set it)
	// addWatch adds a watch (fsw.Add; tests wrap it to make dirs race
	// the watch).
	addWatch func(dir string) error
	// health is whether the watcher polls (see poll.go), and sig what
	// the last poll saw.
	health watchHealth
	sig    uint64
	addErr error // why the last sync pass could not watch a dir

	// Owned by the goroutine that runs [watcher.run].
	deb     debouncer
	timer   *time.Timer     // fires the trailing load
	subDirs map[string]bool // the conf dir's sub-folders at the last sync
	// watched holds each dir that sync watched, as it was stat'ed just
	// before its watch was added.
	watched map[string]os.FileInfo
	// linkTargets are the files that symlinked configs led to at the last
	// sync; their directories are watched too.
	linkTargets map[string]bool

	stats watchStats
}

// watchStats is what the watcher has done (see [WatchStats]). The watcher
// goroutine writes it; any goroutine may read it.
type watchStats struct {
	leading  atomic.Int64 // loads run at the first event of a burst
	trailing atomic.Int64 // loads run at the end of a burst
	// readyAt is the time (Unix nanoseconds) from which an event loads at
	// once; math.MaxInt64 while a load runs or is due. It is stored after
	// the counters.
	readyAt atomic.Int64
}

// WatchStats is what the watcher has done, for tests and benchmarks.
type WatchStats struct {
	Leading  int64 // loads run at the first event of a burst
	Trailing int64 // loads run at the end of a burst
	// Busy is set while a load runs or a trailing load is due; otherwise
	// ReadyAt is when an event will load at once (the zero time: now).
	Busy    bool
	ReadyAt time.Time
}

// Idle reports whether an event at now loads at once: the watcher's burst
// is over, and its events have all been handled.
func (s WatchStats) Idle(now time.Time) bool { return !s.Busy && !now.Before(s.ReadyAt) }

// WatchStats returns what the watcher has done so far; the zero value
// without a watcher.
func (l *Loader) WatchStats() WatchStats {
	if l.watcher == nil {
		return WatchStats{}
	}
	st := &l.watcher.stats
	var s WatchStats
	// readyAt first: it is stored after the counters, so the counters
	// read next are at least as recent.
	switch at := st.readyAt.Load(); at {
	case math.MaxInt64:
		s.Busy = true
	case 0:
	default:
		s.ReadyAt = time.Unix(0, at)
	}
	s.Leading, s.Trailing = st.leading.Load(), st.trailing.Load()
	return s
}

// newWatcher watches confDir and binDirs, and calls load for each burst
// of changes. Its owner runs [watcher.run] and cancels its context. When
// inotify cannot serve it (no instance or watch left), it polls the dirs
// instead until inotify can (see poll.go).
func newWatcher(confDir string, binDirs []string, debounce time.Duration,
	load func(ctx context.Context, provisional bool) bool, log *logrus.Entry,
	newFSW func() (*fsnotify.Watcher, error), wrapAdd func(func(string) error) func(string) error,
) *watcher {
	if newFSW == nil {
		newFSW = fsnotify.NewWatcher
	}
	w := &watcher{
		confDir: confDir,
		targets: append([]string{confDir}, binDirs...),
		deb:     debouncer{window: debounce, settle: settleDelay, maxDelay: maxLoadDelay},
		load:    load,
		log:     log.WithField("component", "watcher"),
		newFSW:  newFSW,
		wrapAdd: wrapAdd,
		watched: map[string]os.FileInfo{},
	}
	if w.makeFSW() {
		w.sync()
	} else {
		w.setPolling(fmt.Errorf("ocicni: creating fsnotify watcher: %w", w.fswErr))
	}
	return w
}

// sync adds and removes watches so that they match the dirs that exist
// now, and reports whether it watched a dir that it had not watched
// before. A dir made below a watched one before that watch was in place
// makes no event (MkdirAll of a conf dir several levels below its nearest
// existing ancestor, racing the watcher), so sync passes again after
// every pass that found a new dir, until a pass finds none: from then on,
// every wanted dir that exists is watched, and one made later is an
// event. There are at least two passes, since a pass may re-watch a dir
// that it cannot tell from the one it watched before (see
// [watcher.syncPass]). Each caller loads after sync, so that a file
// written into a dir before its watch was in place is read.
func (w *watcher) sync() bool {
	if w.fsw == nil {
		return false // polled (see poll.go)
	}
	added := false
	defer func() { w.setPolling(w.addErr) }()
	for pass := range maxSyncPasses {
		if w.syncPass() {
			added = true
		} else if pass > 0 {
			return added
		}
	}
	// Dirs keep coming and going; the events of those watched so far, or
	// the resync, bring the next pass.
	w.log.Debug("CNI directories keep changing; watches may lag until the next event")
	return added
}

// syncPass makes one pass of [watcher.sync], and reports whether it found
// a dir new: not watched before, dropped by fsnotify (as it does for a
// dir deleted or moved away), or not the dir that was watched at its path.
//
// It adds the watch of every wanted dir again, new or not: fsnotify may
// still list the watch of a dir that was deleted, and a dir made in its
// place may have its inode number (ext4 reuses them at once), so neither
// the list nor a stat tells that the watch is dead. Adding it again
// watches the dir at the path now, and costs nothing when that is the
// dir watched already.
func (w *watcher) syncPass() bool {
	want := w.wanted()
	have := map[string]bool{}
	for _, d := range w.fsw.WatchList() {
		have[d] = true
	}
	found := false
	w.addErr = nil
	for d := range want {
		// Stat before the watch: should d be replaced in between, the next
		// pass sees a dir other than the one recorded.
		fi, err := os.Stat(d)
		if err != nil {
			continue // gone since wanted looked: an event of its parent's watch
		}
		if err := w.addWatch(d); err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // gone since the stat: as above
				w.log.WithField("dir", d).WithError(err).Debug("Cannot watch CNI directory")
				w.addErr = fmt.Errorf("ocicni: watching %s: %w", d, err)
			}
			delete(w.watched, d)
			continue
		}
		if old, ok := w.watched[d]; !ok || !have[d] || !os.SameFile(old, fi) {
			found = true
		}
		w.watched[d] = fi
	}
	for d := range have {
		if !want[d] {
			// Not watched by fsnotify any more when the dir is gone: ErrNonExistentWatch.
			_ = w.fsw.Remove(d)
		}
	}
	for d := range w.watched {
		if !want[d] {
			delete(w.watched, d)
		}
	}
	return found
}

// relevant reports whether an event concerns a target dir or its content,
// or the content of a plugin sub-folder of the conf dir. In the conf dir,
// only config files and sub-folders are read: a file staged under another
// name (such as 10-a.conflist.tmp) before it is renamed into place is no
// change, so that the rename, not the staging, opens the burst.
func (w *watcher) relevant(ev fsnotify.Event) bool {
	name, dir := ev.Name, filepath.Dir(ev.Name)
	for _, t := range w.targets {
		if name == t || strings.HasPrefix(t, name+string(filepath.Separator)) {
			return true // a target dir or one of its ancestors
		}
	}
	switch {
	case w.linkTargets[name]:
		return true // the file a symlinked config leads to
	case slices.Contains(w.targets[1:], dir):
		return true // in a bin dir
	case dir == w.confDir:
		return slices.Contains(confExtensions, filepath.Ext(name)) || w.subDirs[name] || isDir(name)
	case filepath.Dir(dir) == w.confDir:
		return filepath.Ext(name) == ".conf" // in a plugin sub-folder
	}
	return false
}

// run handles events until ctx is done or the fsnotify channels close,
// then closes the fsnotify watcher. While inotify cannot watch every
// dir, it polls them (see poll.go).
func (w *watcher) run(ctx context.Context) {
	defer w.closeFSW()
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	w.timer = time.NewTimer(0)
	if !w.timer.Stop() {
		<-w.timer.C
	}
	w.updateReady()
	poll := time.NewTimer(missingPoll)
	defer poll.Stop()
	for {
		w.armPoll(poll)
		events, errs := w.channels()
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if w.polled() {
				w.changed(ctx)
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			if w.event(ev) {
				w.changed(ctx)
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.failed(err)
			w.changed(ctx)
		case <-w.timer.C:
			provisional := w.deb.fire()
			w.sync()
			w.loadNow(ctx, false, provisional)
		case <-resync.C:
			if w.sync() {
				w.changed(ctx)
			}
		}
	}
}

// event reports whether an event is relevant, and re-syncs the watches
// when a dir may have come or gone.
func (w *watcher) event(ev fsnotify.Event) bool {
	if !w.relevant(ev) {
		return false
	}
	w.log.WithField("event", ev.String()).Debug("CNI directory event")
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create) {
		w.sync() // a target dir may have gone or come
	}
	return true
}

// failed handles an overflow or a lost watch: re-check, then load.
func (w *watcher) failed(err error) {
	w.log.WithError(err).Error("CNI directory watch error; re-syncing")
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.log.Warn("Event queue overflowed")
	}
	w.sync()
}

// changed loads at once when a change opens a burst, and otherwise
// (re)arms the trailing load.
func (w *watcher) changed(ctx context.Context) {
	leading, delay := w.deb.event(time.Now())
	if leading {
		w.loadNow(ctx, true, true)
		return
	}
	w.timer.Reset(delay)
	w.updateReady()
}

// loadNow runs a load. A provisional load (the leading one, and the
// burst's first trailing one, which come while a change may be half done)
// logs the files it cannot use at Debug only; when it leaves such skips
// unconfirmed, a trailing load is made due to confirm them. A load that
// is not provisional and leaves some (because it failed, say on a conf
// dir that is gone) makes none: the next event will.
func (w *watcher) loadNow(ctx context.Context, leading, provisional bool) {
	w.stats.readyAt.Store(math.MaxInt64) // not idle while it runs
	unconfirmed := w.load(ctx, provisional)
	now := time.Now()
	w.deb.loaded(now)
	if leading {
		w.stats.leading.Add(1)
	} else {
		w.stats.trailing.Add(1)
	}
	if provisional && unconfirmed {
		w.timer.Reset(w.deb.trail(now))
	}
	w.updateReady()
}

// updateReady updates stats.readyAt from the debouncer.
func (w *watcher) updateReady() {
	at, ok := w.deb.readyAt()
	switch {
	case !ok:
		w.stats.readyAt.Store(math.MaxInt64)
	case at.IsZero():
		w.stats.readyAt.Store(0)
	default:
		w.stats.readyAt.Store(at.UnixNano())
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func existingAncestor(p string) string {
	for {
		if isDir(p) {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return ""
		}
		p = parent
	}
}
