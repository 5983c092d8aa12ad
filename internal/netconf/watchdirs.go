package netconf

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// This file chooses the dirs the watcher watches; watch.go installs the
// watches and handles their events.

// wanted returns the dirs to watch now: the target dirs that exist, the
// nearest existing ancestor of each, the conf dir's sub-folders, and the
// dirs of the files that symlinked configs lead to. It records the
// sub-folders and those files for [watcher.relevant].
func (w *watcher) wanted() map[string]bool {
	want := map[string]bool{}
	for _, t := range w.targets {
		if isDir(t) {
			want[t] = true
		}
		if a := existingAncestor(filepath.Dir(t)); a != "" {
			want[a] = true
		}
	}
	w.subDirs = map[string]bool{}
	w.linkTargets = map[string]bool{}
	des, err := os.ReadDir(w.confDir)
	if err != nil {
		return want
	}
	for _, de := range des {
		if de.IsDir() {
			sub := filepath.Join(w.confDir, de.Name())
			want[sub] = true
			w.subDirs[sub] = true
		}
	}
	var watched []os.FileInfo // the wanted dirs, stat'ed once, when a link needs them
	for _, de := range des {
		if de.Type()&fs.ModeSymlink != 0 && slices.Contains(confExtensions, filepath.Ext(de.Name())) {
			w.watchTarget(filepath.Join(w.confDir, de.Name()), want, &watched)
		}
	}
	return want
}

// watchTarget adds to want the directory of the file that the symlinked
// config link leads to, so that a change of that file (written in place,
// or replaced by a rename in its directory) is an event, and records the
// file in linkTargets. A directory already watched (the conf dir, one of
// its sub-folders, under another path) is not added twice; watched holds
// the wanted dirs' file infos, made at the first call that needs them.
func (w *watcher) watchTarget(link string, want map[string]bool, watched *[]os.FileInfo) {
	t, err := filepath.EvalSymlinks(link)
	if err != nil {
		return // dangling: the load skips it; its link's events still count
	}
	w.linkTargets[t] = true
	d := filepath.Dir(t)
	if want[d] {
		return
	}
	fi, err := os.Stat(d)
	if err != nil {
		return
	}
	if *watched == nil {
		*watched = []os.FileInfo{}
		for have := range want {
			if hfi, err := os.Stat(have); err == nil {
				*watched = append(*watched, hfi)
			}
		}
	}
	for _, hfi := range *watched {
		if os.SameFile(fi, hfi) {
			return
		}
	}
	want[d] = true
	*watched = append(*watched, fi)
}
