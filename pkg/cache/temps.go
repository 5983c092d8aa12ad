package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// RemoveTemps removes the temporary files of this package's durable
// writes that a crash cut short: a record's (".tmp-<containerID>" in
// [Cache.OrdersDir]) and a saved config's (".tmp-config-*" beside the
// shared copies). Nothing else removes a saved config's. A temporary file
// that a write in flight holds, in this process or another, is left:
// every write locks its temporary file (flock) from its creation until
// it has renamed or removed it. Spares (see [IsSpareFile]) are not
// temporary files. It returns the paths it removed, and the failures of
// the listings and removals.
func (c *Cache) RemoveTemps() ([]string, error) {
	if err := c.checkState(ordersRel, configsRel); err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, dir := range []string{c.OrdersDir(), c.ConfigsDir()} {
		des, err := c.root().ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cache: listing %s for temporary files: %w", dir, err))
			continue
		}
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), tmpPrefix) {
				continue
			}
			path := filepath.Join(dir, de.Name())
			ok, err := c.root().RemoveUnheld(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("cache: removing temporary file %s: %w", path, err))
			}
			if ok {
				removed = append(removed, path)
			}
		}
	}
	return removed, errors.Join(errs...)
}
