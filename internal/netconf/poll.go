package netconf

import (
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// This file is the watcher's fallback on a node where inotify cannot
// serve it: no instance left for a new fsnotify watcher, or no watch
// left for a dir (fs.inotify.max_user_instances and max_user_watches are
// per user, and every watcher of the node draws on them). The watcher
// then polls the dirs it would watch, every pollInterval, and loads when
// what it sees changed; at each poll it tries inotify again, which takes
// over once it works.

// pollInterval is how often the dirs are polled while inotify cannot
// watch them all: a change is seen within it.
const pollInterval = time.Second

// watchHealth is whether the watcher polls, and why. The watcher
// goroutine (and newWatcher) write it; any goroutine may read it.
type watchHealth struct {
	mu      sync.Mutex // a leaf
	polling bool
	cause   error
}

// WatchHealth returns whether the conf dirs are polled because inotify
// cannot watch them, and why; false without a watcher.
func (l *Loader) WatchHealth() (polling bool, cause error) {
	if l.watcher == nil {
		return false, nil
	}
	h := &l.watcher.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.polling, h.cause
}

// polling reports whether the watcher polls.
func (w *watcher) polling() bool {
	w.health.mu.Lock()
	defer w.health.mu.Unlock()
	return w.health.polling
}

// setPolling records whether the watcher polls, and why, and logs each
// change once.
func (w *watcher) setPolling(cause error) {
	w.health.mu.Lock()
	was := w.health.polling
	w.health.polling, w.health.cause = cause != nil, cause
	w.health.mu.Unlock()
	switch {
	case cause != nil && !was:
		w.log.WithError(cause).Warn("inotify cannot watch the CNI directories; polling them every " +
			pollInterval.String() + " until it can")
		w.sig = w.signature()
	case cause == nil && was:
		w.log.Info("inotify watches the CNI directories again; polling stopped")
	}
}

// makeFSW makes the fsnotify watcher, when there is none, and reports
// whether there is one now.
func (w *watcher) makeFSW() bool {
	if w.fsw != nil {
		return true
	}
	fsw, err := w.newFSW()
	if err != nil {
		w.fswErr = err
		return false
	}
	w.fsw, w.fswErr = fsw, nil
	w.addWatch = fsw.Add
	if w.wrapAdd != nil {
		w.addWatch = w.wrapAdd(w.addWatch)
	}
	return true
}

// poll is one poll while inotify cannot watch every dir: it tries to
// make the watcher and the watches again, and reports whether a dir
// changed since the last poll (or a watch is new, as [watcher.sync]
// does).
func (w *watcher) poll() bool {
	changed := false
	if w.makeFSW() {
		changed = w.sync()
	} else {
		w.setPolling(w.fswErr)
	}
	if sig := w.signature(); sig != w.sig {
		w.sig, changed = sig, true
	}
	return changed
}

// signature sums up what a load reads in the dirs the watcher wants:
// each entry's name, type, size, modification and change times, and
// those of the files that symlinked configs lead to.
func (w *watcher) signature() uint64 {
	h := fnv.New64a()
	want := w.wanted()
	dirs := make([]string, 0, len(want))
	for d := range want {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	add := func(name string, fi os.FileInfo) {
		_, _ = h.Write([]byte(name))
		_, _ = h.Write([]byte{0})
		if fi == nil {
			return
		}
		_, _ = h.Write([]byte(fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " +
			strconv.FormatInt(fi.ModTime().UnixNano(), 10) + " " + strconv.FormatInt(changeTime(fi), 10) + "\n"))
	}
	for _, d := range dirs {
		des, err := os.ReadDir(d)
		add(d, nil)
		if err != nil {
			continue
		}
		for _, de := range des {
			fi, err := de.Info()
			if err != nil {
				continue
			}
			add(de.Name(), fi)
		}
	}
	targets := make([]string, 0, len(w.linkTargets))
	for t := range w.linkTargets {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	for _, t := range targets {
		fi, _ := os.Stat(t)
		add(t, fi)
	}
	return h.Sum64()
}

// changeTime returns fi's inode change time in Unix nanoseconds, where
// the platform tells, else 0.
func changeTime(fi os.FileInfo) int64 {
	_, changed, ok := fsutil.Links(fi)
	if !ok {
		return 0
	}
	return changed.UnixNano()
}

// closeFSW closes the fsnotify watcher, if any.
func (w *watcher) closeFSW() {
	if w.fsw != nil {
		_ = w.fsw.Close()
	}
}

// armPoll arms poll for the next poll while inotify cannot watch every
// dir, or for the next look while the conf dir is missing (see
// missingPoll).
func (w *watcher) armPoll(poll *time.Timer) {
	switch {
	case w.polling():
		poll.Reset(pollInterval)
	case !isDir(w.confDir):
		poll.Reset(missingPoll)
	}
}

// polled handles poll's tick, and reports whether a load is due.
func (w *watcher) polled() bool {
	if w.polling() {
		return w.poll()
	}
	return w.sync()
}

// channels returns the fsnotify watcher's channels; nil ones, which
// never deliver, while there is none.
func (w *watcher) channels() (chan fsnotify.Event, chan error) {
	if w.fsw == nil {
		return nil, nil
	}
	return w.fsw.Events, w.fsw.Errors
}
