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
// added to the sandbox's attachment order record (with its netns and its
// cached config, saved next to the record), so that a later [Manager.GC]
// that does not list the sandbox as valid still runs DEL for it, with
// that config, and releases what the plugins hold. Each dropped entry is logged.
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

	files, err := m.cachedFiles(&pod)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	if err := m.recordAll(pod.ID, files, log); err != nil {
		return nil, err
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

// cachedFile is one cache file of a sandbox and the attachment it names
// (Network is "" for a corrupt file whose name cannot be split).
type cachedFile struct {
	path string
	att  cache.Attachment
}

// cachedFiles lists the cache files of the sandbox, readable or corrupt.
// The netns of each is the entry's, when usable, else the pod's.
func (m *Manager) cachedFiles(pod *PodNetwork) ([]cachedFile, error) {
	listing, err := m.cache.ForContainer(pod.ID)
	if err != nil {
		return nil, fmt.Errorf("ocicni: forgetting the cache of %s: %w", pod.ID, err)
	}
	files := make([]cachedFile, 0, len(listing.Entries)+len(listing.Corrupt))
	for _, e := range listing.Entries {
		netns, nerr := storedNetNS(e.NetNS)
		if nerr != nil || netns == "" {
			netns = pod.NetNS
		}
		att := cache.Attachment{Network: e.Network, IfName: e.IfName, NetNS: netns}
		// The cached config goes with the record, so that GC deletes the
		// attachment with it even when its config file is gone.
		if digest, err := m.cache.SaveConfig(pod.ID, e.Config); err == nil {
			att.Config = digest
		} else {
			return nil, fmt.Errorf("ocicni: forgetting the cache of %s: saving its config: %w", pod.ID, err)
		}
		files = append(files, cachedFile{e.Path, att})
	}
	for _, ee := range listing.Corrupt {
		files = append(files, cachedFile{ee.Path, cache.Attachment{Network: ee.Network, IfName: ee.IfName, NetNS: pod.NetNS}})
	}
	return files, nil
}

// recordAll adds to the sandbox's order record every attachment the files
// name that it lacks, replacing an unreadable record.
func (m *Manager) recordAll(id string, files []cachedFile, log *logrus.Entry) error {
	recorded, rerr := m.cache.ReadOrder(id)
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
	if rerr == nil && len(atts) == len(recorded) {
		return nil
	}
	if err := m.cache.WriteOrder(id, atts); err != nil {
		return fmt.Errorf("ocicni: forgetting the cache of %s: recording its attachments first: %w", id, err)
	}
	return nil
}
