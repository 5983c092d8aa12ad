package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// SaveConfig saves config b for sandbox id's record and returns what it
// wrote: the digest that the record's line names it by, and what
// [Ledger.UndoSaveConfig] takes back (see [cache.Cache.SaveConfigUndoable]).
func (l *Ledger) SaveConfig(id string, b []byte) (cache.ConfigSave, error) {
	return l.c.SaveConfigUndoable(id, b)
}

// UndoSaveConfig takes back what a SaveConfig wrote.
func (l *Ledger) UndoSaveConfig(s cache.ConfigSave) error { return l.c.UndoSaveConfig(s) }

// RemoveUnusedConfig removes a shared copy of a saved config that no
// record links (see [cache.Cache.RemoveSavedConfig]).
func (l *Ledger) RemoveUnusedConfig(sc cache.SavedConfig) error { return l.c.RemoveSavedConfig(sc) }

// retriesMark is the file whose modification time says when a record
// last came to leave a DEL retry pending, in any engine or process: node
// state beside the node gate's files, which no sandbox owns.
func (l *Ledger) retriesMark() string { return filepath.Join(l.c.Dir(), "ocicni", "locks", ".retries") }

// MarkRetries tells the node's other engines that a record now leaves a
// DEL retry pending (see [Ledger.RetriesMarked]), so that one that lives
// longer than the process that wrote it adopts the retry.
func (l *Ledger) MarkRetries() error {
	r, p := l.root(), l.retriesMark()
	now := time.Now()
	err := r.Chtimes(p, now, now)
	if errors.Is(err, fs.ErrNotExist) {
		if err = r.MkdirAll(filepath.Dir(p), 0o700); err == nil {
			var f *os.File
			if f, err = r.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
				err = errors.Join(f.Close(), r.Chtimes(p, now, now))
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ledger: marking a pending DEL retry: %w", err)
	}
	return nil
}

// RetriesMarked returns when a record last came to leave a DEL retry
// pending (see [Ledger.MarkRetries]); the zero time when none did.
func (l *Ledger) RetriesMarked() time.Time {
	fi, err := l.root().Lstat(l.retriesMark())
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}
