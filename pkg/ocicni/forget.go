package ocicni

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// ForgetPodCache drops the libcni cache entries of the sandbox pod.ID, on
// purpose, from the configured cache dir, and returns the paths it
// removed. It is the replacement for deleting
// /var/lib/cni/results/*<id>* by hand, which CRI-O does after a failed
// teardown: before any file goes, every attachment the entries name is
// added to the sandbox's attachment order record (with its netns), so
// that a later [Manager.GC] that does not list the sandbox as valid still
// runs DEL for it, with the loaded config, and releases what the plugins
// hold. Each dropped entry is logged.
//
// Only pod.ID is used (and pod.NetNS, for entries that name no netns).
// ForgetPodCache runs no plugin. It removes nothing when the record cannot
// be written.
func (m *Manager) ForgetPodCache(ctx context.Context, pod PodNetwork) ([]string, error) {
	release, log, err := m.beginPodOp(ctx, &pod)
	if err != nil {
		return nil, err
	}
	defer release()

	listing, err := m.cache.ForContainer(pod.ID)
	if err != nil {
		return nil, fmt.Errorf("ocicni: forgetting the cache of %s: %w", pod.ID, err)
	}
	type file struct {
		path string
		att  cache.Attachment
	}
	var files []file
	for _, e := range listing.Entries {
		netns, nerr := storedNetNS(e.NetNS)
		if nerr != nil || netns == "" {
			netns = pod.NetNS
		}
		files = append(files, file{e.Path, cache.Attachment{Network: e.Network, IfName: e.IfName, NetNS: netns}})
	}
	for _, ee := range listing.Corrupt {
		// A corrupt entry goes too; its names come from its file name,
		// when they can be known.
		files = append(files, file{ee.Path, cache.Attachment{Network: ee.Network, IfName: ee.IfName, NetNS: pod.NetNS}})
	}
	if len(files) == 0 {
		return nil, nil
	}

	recorded, rerr := m.cache.ReadOrder(pod.ID)
	if rerr != nil {
		log.WithError(rerr).Warn("Replacing an unreadable attachment order record")
		recorded = nil
	}
	atts := slices.Clone(recorded)
	for _, f := range files {
		if f.att.Network == "" || slices.ContainsFunc(atts, func(a cache.Attachment) bool {
			return a.Network == f.att.Network && a.IfName == f.att.IfName
		}) {
			continue
		}
		atts = append(atts, f.att)
	}
	if rerr != nil || len(atts) > len(recorded) {
		if err := m.cache.WriteOrder(pod.ID, atts); err != nil {
			return nil, fmt.Errorf("ocicni: forgetting the cache of %s: recording its attachments first: %w", pod.ID, err)
		}
	}

	var removed []string
	var errs []error
	for _, f := range files {
		if err := m.cache.RemoveFile(f.path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, f.path)
		log.WithFields(logrus.Fields{"network": f.att.Network, "ifname": f.att.IfName, "file": filepath.Base(f.path)}).
			Info("Forgot CNI cache entry; the attachment stays recorded for GC")
	}
	return removed, errors.Join(errs...)
}
