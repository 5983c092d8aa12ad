package netconf

import (
	"bytes"
	"sync"

	"github.com/sirupsen/logrus"
)

// publications wakes the waiters for the next publication.
type publications struct {
	mu   sync.Mutex    // guards next; taken after the loader's lock
	next chan struct{} // closed and replaced by every publication
}

// Published returns a channel that is closed by the next publication.
// Take it before reading [Loader.Snapshot], so that no publication is
// missed between the two.
func (l *Loader) Published() <-chan struct{} {
	l.pub.mu.Lock()
	defer l.pub.mu.Unlock()
	return l.pub.next
}

// publish swaps in a new set, logs what changed, and wakes the waiters
// for a publication. load calls it with the lock held, so sets are
// published in the order in which their loads read the conf dir.
func (l *Loader) publish(set *Set) {
	old := l.current.Swap(set)
	l.logChanges(old, set)
	l.pub.mu.Lock()
	close(l.pub.next)
	l.pub.next = make(chan struct{})
	l.pub.mu.Unlock()
	if l.onPub != nil {
		l.onPub()
	}
}

func (l *Loader) logChanges(old, set *Set) {
	for name, n := range set.byName {
		if o := old.byName[name]; o == nil || o.File != n.File || !bytes.Equal(o.List.Bytes, n.List.Bytes) {
			l.log.WithFields(logrus.Fields{
				"network": name, "file": n.File,
				"type": n.List.Plugins[0].Network.Type,
			}).Info("Loaded CNI network")
		}
	}
	for name := range old.byName {
		if set.byName[name] == nil {
			l.log.WithField("network", name).Info("CNI network removed")
		}
	}
	if old.defaultName != set.defaultName {
		l.log.WithField("network", set.defaultName).Info("Default CNI network changed")
	}
	l.logSkips(old, set)
}

// logSkips logs each file that set skips and old did not warn about: at
// Warn, or at Debug while the skip is unconfirmed (the file may be
// half-written, and a trailing load will look again).
func (l *Loader) logSkips(old, set *Set) {
	for _, sk := range set.skipped {
		if old.warned(sk) {
			continue
		}
		entry := l.log.WithFields(logrus.Fields{"file": sk.File, "network": sk.Network}).WithError(sk.Err)
		if set.unconfirmed[sk] {
			entry.Debug("Cannot use CNI config file yet; reloading to confirm")
			continue
		}
		entry.Warn("Skipping CNI config file")
	}
}
