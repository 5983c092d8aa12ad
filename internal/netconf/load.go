package netconf

import (
	"context"
)

// Load runs one load for its caller: it reads the conf dir, builds a new
// set and publishes it before it returns. Files that cannot be used are
// skipped and recorded in the set, not returned. It returns an error only
// when the conf dir is unreadable (the last good set then stays) or ctx
// ends first. ctx bounds the waits for the loader's lock and for VERSION
// answers; a network still waiting for one is skipped with
// [ErrVersionPending] (or keeps the config it had), and loads when the
// answer comes.
func (l *Loader) Load(ctx context.Context) error {
	return l.load(ctx, false)
}

// load reads the conf dir and publishes the set it builds, unless a load
// that read the conf dir later has published already: sets are published
// in the order in which their loads read the conf dir, so a slow load
// never overwrites a newer set. It holds the lock while it reads and
// parses the files, waits for the VERSION answers of their plugins
// without it, and takes it again to publish; no lock is held while a
// plugin runs. ctx bounds the waits only: VERSION calls run under no
// caller's context (see versionCache). A load stops waiting for VERSION
// answers when [Loader.Shutdown] cuts the calls short, and publishes
// their networks as pending, as it does when it stops waiting on time.
//
// A provisional load is the watcher's leading load of a burst of events,
// which may read a file that its writer has created but not yet written.
// The new skips of files that it cannot read or parse stay unconfirmed
// (see Set.unconfirmed); the watcher's trailing load confirms them.
func (l *Loader) load(ctx context.Context, provisional bool) error {
	cut := l.versions.cutsNow() // before scan gets the calls
	s, err := l.scan(ctx)
	if err != nil {
		return err
	}
	s.provisional = provisional
	waitFor := make([]*versionEntry, 0, len(s.bins))
	for _, b := range s.bins {
		if b.version != nil {
			waitFor = append(waitFor, b.version)
		}
	}
	if err := waitVersions(ctx, waitFor, l.wait, cut); err != nil {
		return err
	}
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	if s.gen <= l.published {
		return nil // a load that read the conf dir later has published
	}
	l.published = s.gen
	l.publish(l.assemble(s))
	return nil
}

// loadOrLog runs a load that no caller waits for the error of (the
// first load, the watcher's, a requested one), logs its failure, and
// returns the set published last.
func (l *Loader) loadOrLog(ctx context.Context, provisional bool) *Set {
	if err := l.load(ctx, provisional); err != nil {
		if ctx.Err() == nil {
			l.log.WithError(err).Error("CNI config reload failed; keeping the last good config")
		} else {
			l.log.WithError(err).Debug("CNI config reload abandoned")
		}
	}
	return l.Snapshot()
}

// watchLoad is the watcher's load, provisional or not (see
// [watcher.loadNow]). It reports whether the set published last holds
// skips that no load has confirmed yet, so that the watcher runs one that
// does.
func (l *Loader) watchLoad(ctx context.Context, provisional bool) (unconfirmed bool) {
	return len(l.loadOrLog(ctx, provisional).unconfirmed) > 0
}
