package ocicni

import (
	"time"

	"github.com/sirupsen/logrus"
)

// savedConfigGrace is how recently a shared copy of a saved config must
// have changed for GC to keep it although no record it read uses it: a
// setup saves a config just before it writes the record that uses it,
// possibly after GC read the records.
const savedConfigGrace = 10 * time.Minute

// sweepConfigs removes the shared copies of saved configs that no record
// links or uses (a crash between saving a config and writing its record,
// links lost with a power loss, or the copies a Cache keeps for its next
// setups) once they are older than [savedConfigGrace]. Links whose record
// is gone are removed with their container, under its lock (see
// [Manager.deleteStaleContainer]). recs holds the records GC read and the
// saved configs listed with them. Failures are logged: a file left behind
// costs only disk space until the next GC.
func (m *Manager) sweepConfigs(recs *records, log *logrus.Entry) {
	used := map[string]bool{}
	for _, record := range recs.byID {
		for _, a := range record {
			used[a.Config] = true
		}
	}
	cutoff := time.Now().Add(-m.opts.configGrace)
	for _, sc := range recs.saved {
		if sc.ContainerID != "" || sc.Links != 1 || used[sc.Digest] || sc.Changed.After(cutoff) {
			continue
		}
		if err := m.cache.RemoveSavedConfig(sc); err != nil {
			log.WithError(err).Warn("Cannot remove an unused saved config")
		} else if debugEnabled(log) {
			log.WithFields(logrus.Fields{"config": sc.Digest, "file": sc.Path}).Debug("Removed an unused saved config")
		}
	}
}
