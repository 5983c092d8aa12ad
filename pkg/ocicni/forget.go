package ocicni

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// forget is [Manager.ForgetPodCache]: see there.
func (d *detacher) forget(ctx context.Context, pod PodNetwork) ([]string, error) {
	ctx, release, log, err := d.beginPodOp(ctx, &pod)
	if err != nil {
		return nil, err
	}
	defer release()
	d.fresh.forget(pod.ID)

	inv := d.store.takeInventory(pod.ID, nil, d.snapshot(), log)
	if inv.listErr != nil {
		return nil, fmt.Errorf("ocicni: forgetting the cache of %s: %w", pod.ID, inv.listErr)
	}
	files := inv.cacheFiles()
	if len(files) == 0 {
		return nil, nil
	}
	lines, err := d.forgottenLines(&pod, inv, files)
	if err != nil {
		return nil, fmt.Errorf("ocicni: forgetting the cache of %s: saving its config: %w", pod.ID, err)
	}
	drop := make([]ledger.Entry, len(files))
	for i, f := range files {
		drop[i] = ledger.Entry{Path: f.file()}
	}
	if err := d.store.forget(ctx, pod.ID, inv, lines, drop, log); err != nil {
		return nil, fmt.Errorf("ocicni: forgetting the cache of %s: %w", pod.ID, err)
	}
	removed := make([]string, len(files))
	for i, f := range files {
		removed[i] = f.file()
		log.WithFields(logrus.Fields{"network": f.Name, "ifname": f.Ifname, "file": filepath.Base(f.file())}).
			Info("Forgot CNI cache entry; the attachment stays recorded for GC")
	}
	return removed, nil
}

// forgottenLines returns the record lines of the attachments that the
// cache files name and the record lacks, with the netns of the entry
// (else the pod's) and, for a readable entry, its cached config saved
// with the record, so that GC deletes the attachment with it even when
// its config file is gone. An unreadable record lacks every one.
func (d *detacher) forgottenLines(pod *PodNetwork, inv *inventory, files []*knownAttachment) ([]cache.Attachment, error) {
	var lines []cache.Attachment
	for _, f := range files {
		if f.Name == "" || findLine(lines, f.Name, f.Ifname) != nil ||
			inv.recordErr == nil && findLine(inv.record, f.Name, f.Ifname) != nil {
			continue
		}
		a, err := d.forgottenLine(pod, f)
		if err != nil {
			return nil, err
		}
		lines = append(lines, a)
	}
	return lines, nil
}

// forgottenLine is the record line of the attachment a cache file names
// (f, a known attachment).
func (d *detacher) forgottenLine(pod *PodNetwork, f *knownAttachment) (cache.Attachment, error) {
	a := cache.Attachment{Network: f.Name, IfName: f.Ifname, NetNS: pod.NetNS}
	if f.entry == nil {
		return a, nil
	}
	e := f.entry
	if netns, err := usableStoredNetNS(e.NetNS); err == nil && netns != "" {
		a.NetNS = netns
	}
	saved, err := d.store.led.SaveConfig(pod.ID, e.Config)
	a.Config = saved.Digest
	return a, err
}
