package ocicni

import (
	"context"
	"fmt"
)

// Reload reads the conf dir now and publishes the new network set before
// it returns, for callers that own reloads, such as the go-cni face
// (package gocni), whose users call Load when their own watcher sees a
// change. It works with or without the watcher. ctx bounds the wait for
// the loader's lock and for plugins' VERSION answers (a network still
// waiting for one is reported by [Manager.Skipped] with
// [ErrVersionPending]). On an error, such as an unreadable conf dir, the
// last good set stays.
func (m *Manager) Reload(ctx context.Context) error {
	if err := m.loader.load(ctx, false); err != nil {
		return fmt.Errorf("ocicni: reloading %s: %w", m.opts.confDir, err)
	}
	return nil
}
