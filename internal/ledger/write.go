package ledger

import (
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Commit writes next as sandbox id's order record, durably, in place of
// old, the record as the caller read it under the sandbox's lock: an
// empty next removes it. Then the saved configs that old links and next
// does not are released; released is why that failed (GC removes what is
// left). When err is set, the record is as it was, or, when err matches
// [cache.ErrNotDurable], replaced by next without the guarantee of
// lasting (see [Ledger.Restore]).
func (l *Ledger) Commit(id string, old, next []cache.Attachment) (released, err error) {
	if err := l.Restore(id, next); err != nil {
		return nil, err
	}
	return l.c.ReleaseConfigs(id, unusedConfigs(old, next)...), nil
}

// Restore writes record as sandbox id's order record, or removes it when
// record is empty, and releases nothing: how a caller puts back the
// record that a failed change replaced.
func (l *Ledger) Restore(id string, record []cache.Attachment) error {
	if len(record) == 0 {
		return l.c.RemoveOrder(id)
	}
	return l.c.WriteOrder(id, record)
}

// unusedConfigs returns the config digests that before links and after
// does not.
func unusedConfigs(before, after []cache.Attachment) []string {
	kept := make(map[string]bool, len(after))
	for _, a := range after {
		kept[a.Config] = true
	}
	var out []string
	for _, a := range before {
		if a.Config != "" && !kept[a.Config] {
			kept[a.Config] = true
			out = append(out, a.Config)
		}
	}
	return out
}

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

// DropEntry removes the cache entry of (network, id, ifname), or the
// file at path when path is set (a corrupt file, or one found by a
// listing). An absent one is not an error.
func (l *Ledger) DropEntry(network, id, ifname, path string) error {
	if path != "" {
		return l.c.RemoveFile(path)
	}
	return l.c.Remove(network, id, ifname)
}

// RemoveStrays removes what a setup of sandbox id killed before it wrote
// its record may have left: links to saved configs and temporary record
// files (see [cache.Cache.RemoveStrays]). The caller holds the sandbox's
// lock and has found no record.
func (l *Ledger) RemoveStrays(id string) error { return l.c.RemoveStrays(id) }
