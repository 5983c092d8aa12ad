package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// This file takes back saved configs: what [Cache.SaveConfigUndoable]
// made, for a caller whose record could not be written.

// ConfigSave is what one [Cache.SaveConfigUndoable] call made, so that
// [Cache.UndoSaveConfig] removes exactly that: the record's link when it
// was new, and the shared copy when the call wrote it.
type ConfigSave struct {
	// Digest names the config saved.
	Digest           string
	id               string
	newLink, newCopy bool
}

// UndoSaveConfig removes what the save s made: the record's link, if the
// save made it, and the shared copy, if the save wrote it and no record
// links it since. It is for a caller whose record could not be written,
// before any other write of the same record. An absent file is not an
// error.
func (c *Cache) UndoSaveConfig(s ConfigSave) error {
	var errs []error
	if s.newLink {
		link, err := c.configLink(s.id, s.Digest)
		if err == nil {
			err = os.Remove(link)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cache: undo saving config %s: %w", s.Digest, err))
		}
	}
	if s.newCopy {
		if err := c.removeUnlinkedCopy(s.Digest); err != nil {
			errs = append(errs, fmt.Errorf("cache: undo saving config %s: %w", s.Digest, err))
		}
	}
	return errors.Join(errs...)
}

// removeUnlinkedCopy removes the shared copy of digest when no record
// links it.
func (c *Cache) removeUnlinkedCopy(digest string) error {
	path, err := c.configPath(digest)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if n, _, ok := fsutil.Links(fi); ok && n == 1 {
		// A record that links it meanwhile keeps its own link.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
