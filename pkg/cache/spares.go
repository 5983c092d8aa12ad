package cache

import (
	"strings"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// spareFilePrefix starts the names of retired order records kept for
// reuse (see [fsutil.Spares]). Container IDs cannot start with '.', so no
// record is named so.
const spareFilePrefix = fsutil.SparePrefix

// A Cache keeps up to maxSpares retired order records, so that
// [Cache.WriteOrder] can reuse them instead of creating a file (every pod
// setup writes a record and its teardown removes it). A spare is written
// under its own name and only then renamed into place, so a reader still
// sees the old record or the new one, never a spare's stale content.
const maxSpares = fsutil.MaxSpares

// IsSpareFile reports whether name, a file name in [Cache.OrdersDir], is
// a retired order record that a Cache keeps for reuse: not a record, and
// not left behind by any pod (a Cache keeps at most 32).
func IsSpareFile(name string) bool { return strings.HasPrefix(name, spareFilePrefix) }
