package ocicni

import (
	"time"

	"github.com/sirupsen/logrus"
)

// savedConfigGrace is how recently a saved config or a record's link to
// it must have changed for GC to keep it although no record it read uses
// it: a setup links a config just before it writes the record that uses
// it, possibly after GC read the records.
const savedConfigGrace = 10 * time.Minute

// sweepConfigs removes what [cache.Cache.ReleaseConfigs] could not: links
// of records that are gone (a record removed while unreadable, or a crash
// between the two removals), and shared copies of saved configs that no
// record links (a crash between saving a config and writing its record),
// once they are older than [savedConfigGrace]. recs holds the records GC
// read. Failures are logged: a file left behind costs only disk space
// until the next GC.
func (m *Manager) sweepConfigs(recs *records, log *logrus.Entry) {
	saved, err := m.cache.ListConfigs()
	if err != nil {
		log.WithError(err).Warn("Cannot list saved configs")
		return
	}
	cutoff := time.Now().Add(-savedConfigGrace)
	for _, sc := range saved {
		if sc.Changed.After(cutoff) {
			continue
		}
		var stray bool
		if sc.ContainerID != "" {
			_, recorded := recs.byID[sc.ContainerID]
			_, unreadable := recs.corrupt[sc.ContainerID]
			stray = !recorded && !unreadable
		} else {
			stray = sc.Links == 1
		}
		if !stray {
			continue
		}
		if err := m.cache.RemoveSavedConfig(sc); err != nil {
			log.WithError(err).Warn("Cannot remove an unused saved config")
		} else if debugEnabled(log) {
			log.WithFields(logrus.Fields{"config": sc.Digest, "file": sc.Path}).Debug("Removed an unused saved config")
		}
	}
}
