package ocicni

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
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
	m       *Manager
	fsw     *fsnotify.Watcher
	targets []string
}

func newWatcher(m *Manager) (*watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("ocicni: creating fsnotify watcher: %w", err)
	}
	w := &watcher{m: m, fsw: fsw, targets: append([]string{m.opts.confDir}, m.opts.binDirs...)}
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
	if des, err := os.ReadDir(w.m.opts.confDir); err == nil {
		for _, de := range des {
			if de.IsDir() {
				want[filepath.Join(w.m.opts.confDir, de.Name())] = true
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
			w.m.log.WithField("dir", d).WithError(err).Warn("Cannot watch CNI directory")
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
	if filepath.Dir(filepath.Dir(name)) == w.m.opts.confDir {
		return true
	}
	for _, t := range w.targets {
		if name == t || filepath.Dir(name) == t || strings.HasPrefix(t, name+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (w *watcher) run() {
	defer w.m.wg.Done()
	defer w.fsw.Close()
	ctx := w.m.ctx
	log := w.m.log.WithField("component", "watcher")

	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	timer := time.NewTimer(0)
	if !timer.Stop() {
		<-timer.C
	}
	var first time.Time // start of the pending burst; zero when none
	schedule := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		delay := w.m.opts.debounce
		if rest := maxReloadDelay - now.Sub(first); rest < delay {
			delay = max(rest, 0)
		}
		timer.Reset(delay)
	}

	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if !w.relevant(ev.Name) {
				continue
			}
			log.WithField("event", ev.String()).Debug("CNI directory event")
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create) {
				w.sync() // a target dir may have gone or come
			}
			schedule()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			// An overflow or a lost watch: log, re-check, reload everything.
			log.WithError(err).Error("CNI directory watch error; re-syncing")
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				log.Warn("Event queue overflowed")
			}
			w.sync()
			schedule()
		case <-timer.C:
			first = time.Time{}
			w.sync()
			w.m.reload(ctx)
		case <-resync.C:
			if w.sync() {
				schedule()
			}
		}
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
