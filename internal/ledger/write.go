package ledger

import (
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// SaveConfig saves config b for sandbox id's record and returns its
// digest (see [cache.Cache.SaveConfig]).
func (l *Ledger) SaveConfig(id string, b []byte) (string, error) { return l.c.SaveConfig(id, b) }

// SaveConfigUndoable is SaveConfig that returns what it wrote, for
// [Ledger.UndoSaveConfig].
func (l *Ledger) SaveConfigUndoable(id string, b []byte) (cache.ConfigSave, error) {
	return l.c.SaveConfigUndoable(id, b)
}

// UndoSaveConfig takes back what a SaveConfigUndoable wrote.
func (l *Ledger) UndoSaveConfig(s cache.ConfigSave) error { return l.c.UndoSaveConfig(s) }

// RemoveUnusedConfig removes a shared copy of a saved config that no
// record links (see [cache.Cache.RemoveSavedConfig]).
func (l *Ledger) RemoveUnusedConfig(sc cache.SavedConfig) error { return l.c.RemoveSavedConfig(sc) }
