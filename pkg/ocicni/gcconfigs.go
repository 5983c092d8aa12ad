package ocicni

import (
	"time"

	"github.com/sirupsen/logrus"
)

// savedConfigGrace is how recently a saved config must have been saved
// for GC to keep it although no record it read refers to it: a setup, a
// teardown or a heal retry saves (or touches) a config just before it
// writes the record that refers to it, possibly after GC read the records.
const savedConfigGrace = 10 * time.Minute

// sweepConfigs removes the saved configs that no order record in recs
// refers to and that nobody saved within [savedConfigGrace]. Failures are
// logged: a config left behind costs only disk space until the next GC.
func (m *Manager) sweepConfigs(recs *records, log *logrus.Entry) {
	if len(recs.corrupt) > 0 {
		return // an unreadable record may refer to any of them
	}
	saved, err := m.cache.ListConfigs()
	if err != nil {
		log.WithError(err).Warn("Cannot list saved configs")
		return
	}
	used := map[string]bool{}
	for _, record := range recs.byID {
		for _, a := range record {
			used[a.Config] = true
		}
	}
	cutoff := time.Now().Add(-savedConfigGrace)
	for _, c := range saved {
		if used[c.Digest] || c.ModTime.After(cutoff) {
			continue
		}
		if err := m.cache.RemoveConfig(c.Digest); err != nil {
			log.WithError(err).Warn("Cannot remove an unused saved config")
		} else if debugEnabled(log) {
			log.WithField("config", c.Digest).Debug("Removed an unused saved config")
		}
	}
}
