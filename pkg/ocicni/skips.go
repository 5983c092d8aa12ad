package ocicni

import (
	"errors"

	"github.com/sirupsen/logrus"
)

// logSkips logs each file that set skips and old did not warn about: at
// Warn, or at Debug while the skip is unconfirmed (the file may be
// half-written, and a trailing reload will look again).
func (m *Manager) logSkips(old, set *networkSet) {
	for _, sk := range set.skipped {
		if old.warned(sk) {
			continue
		}
		entry := m.log.WithFields(logrus.Fields{"file": sk.File, "network": sk.Network}).WithError(sk.Err)
		if set.unconfirmed[sk] {
			entry.Debug("Cannot use CNI config file yet; reloading to confirm")
			continue
		}
		entry.Warn("Skipping CNI config file")
	}
}

// warned reports whether s skipped e's file for the same kind of reason
// and logged it at Warn, so that a reload does not log the same skip
// again.
func (s *networkSet) warned(e *ConfigError) bool {
	for _, sk := range s.skipped {
		if !s.unconfirmed[sk] && sk.File == e.File && sk.Network == e.Network && errors.Is(skipKind(sk), skipKind(e)) {
			return true
		}
	}
	return false
}

func skipKind(e *ConfigError) error {
	for _, kind := range []error{ErrInvalidConfig, ErrPluginNotFound, ErrUnsupportedVersion, ErrVersionFailed, ErrVersionPending} {
		if errors.Is(e, kind) {
			return kind
		}
	}
	return nil
}
