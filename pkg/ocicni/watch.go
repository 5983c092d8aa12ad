package ocicni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

const (
	// maxReloadDelay caps how long a continuous stream of events can
	// postpone a reload.
	maxReloadDelay = time.Second
	// resyncInterval is how often the watcher re-checks that its watches
	// are in place, in case an event was lost.
	resyncInterval = 30 * time.Second
)

// watcher reloads the manager's networks when the conf dir or a bin dir
// changes. Each target dir is watched when it exists, and so is its parent
// (or nearest existing ancestor), so that a dir created late, or deleted
// and recreated, is picked up. Every sub-folder of the conf dir is watched
// too: a network's plugin sub-folder <confdir>/<name>/ adds plugins to it.
type watcher struct {
	confDir  string
	targets  []string      // the conf dir and the bin dirs
	debounce time.Duration // how long a burst of events is gathered
	reload   func(context.Context)
	log      *logrus.Entry
	fsw      *fsnotify.Watcher

	first time.Time   // start of the pending burst; zero when none
	timer *time.Timer // fires the reload of the pending burst
}

// newWatcher watches confDir and binDirs, and calls reload after each
// burst of changes. Its owner runs [watcher.run] and cancels its context.
func newWatcher(confDir string, binDirs []string, debounce time.Duration, reload func(context.Context),
	log *logrus.Entry,
) (*watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("ocicni: creating fsnotify watcher: %w", err)
	}
	w := &watcher{
		confDir:  confDir,
		targets:  append([]string{confDir}, binDirs...),
		debounce: debounce,
		reload:   reload,
		log:      log.WithField("component", "watcher"),
		fsw:      fsw,
	}
	w.sync()
	return w, nil
}

// sync adds and removes watches so that they match the dirs that exist
// now. It reports whether a target dir is newly watched.
func (w *watcher) sync() bool {
	want := map[string]bool{}
	for _, t := range w.targets {
		if isDir(t) {
			want[t] = true
		}
		if a := existingAncestor(filepath.Dir(t)); a != "" {
			want[a] = true
		}
	}
	if des, err := os.ReadDir(w.confDir); err == nil {
		for _, de := range des {
			if de.IsDir() {
				want[filepath.Join(w.confDir, de.Name())] = true
			}
		}
	}
	have := map[string]bool{}
	for _, d := range w.fsw.WatchList() {
		have[d] = true
	}
	added := false
	for d := range want {
		if have[d] {
			continue
		}
		if err := w.fsw.Add(d); err != nil {
			w.log.WithField("dir", d).WithError(err).Warn("Cannot watch CNI directory")
			continue
		}
		if slices.Contains(w.targets, d) {
			added = true
		}
	}
	for d := range have {
		if !want[d] {
			_ = w.fsw.Remove(d)
		}
	}
	return added
}

// relevant reports whether an event concerns a target dir or its content,
// or the content of a plugin sub-folder of the conf dir.
func (w *watcher) relevant(name string) bool {
	if filepath.Dir(filepath.Dir(name)) == w.confDir {
		return true
	}
	for _, t := range w.targets {
		if name == t || filepath.Dir(name) == t || strings.HasPrefix(t, name+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// run handles events until ctx is done or the fsnotify channels close,
// then closes the fsnotify watcher.
func (w *watcher) run(ctx context.Context) {
	defer w.fsw.Close()
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	w.timer = time.NewTimer(0)
	if !w.timer.Stop() {
		<-w.timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			w.event(ev)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.failed(err)
		case <-w.timer.C:
			w.first = time.Time{}
			w.sync()
			w.reload(ctx)
		case <-resync.C:
			if w.sync() {
				w.schedule()
			}
		}
	}
}

// event schedules a reload for a relevant event, and re-syncs the watches
// when a dir may have come or gone.
func (w *watcher) event(ev fsnotify.Event) {
	if !w.relevant(ev.Name) {
		return
	}
	w.log.WithField("event", ev.String()).Debug("CNI directory event")
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create) {
		w.sync() // a target dir may have gone or come
	}
	w.schedule()
}

// failed handles an overflow or a lost watch: re-check, reload everything.
func (w *watcher) failed(err error) {
	w.log.WithError(err).Error("CNI directory watch error; re-syncing")
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.log.Warn("Event queue overflowed")
	}
	w.sync()
	w.schedule()
}

// schedule (re)arms the reload timer: debounce after the latest event, but
// no later than maxReloadDelay after the first event of the burst.
func (w *watcher) schedule() {
	now := time.Now()
	if w.first.IsZero() {
		w.first = now
	}
	delay := w.debounce
	if rest := maxReloadDelay - now.Sub(w.first); rest < delay {
		delay = max(rest, 0)
	}
	w.timer.Reset(delay)
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
