package ocicni

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/sirupsen/logrus"
)

// GC deletes every cached attachment that does not belong to a pod in
// validPods, using the cached config (so attachments of removed networks
// are collected too), then sends the GC verb with the valid attachments to
// every loaded network at CNI 1.1.0 or later that does not set disableGC.
// A valid pod's attachments are all those the cache holds for its sandbox
// ID plus the networks it names, so a pod never loses an attachment on a
// network that is no longer the default. GC continues past every error and
// returns them joined. It excludes pod operations while it runs and never
// modifies validPods.
func (m *Manager) GC(ctx context.Context, validPods []*PodNetwork) error {
	if m.closed.Load() {
		return ErrShutdown
	}
	if err := m.gate.lock(ctx); err != nil {
		return fmt.Errorf("ocicni: waiting to GC: %w", err)
	}
	defer m.gate.unlock()
	log := m.log.WithField("verb", "GC")

	entries, lerr := m.cache.List()
	var errs []error
	for _, err := range flatten(lerr) {
		log.WithError(err).Warn("Unreadable CNI cache entry")
		errs = append(errs, err)
	}

	set := m.snapshot()
	valid := map[string][]types.GCAttachment{} // network -> valid attachments
	validIDs := map[string]bool{}
	for _, pod := range validPods {
		if pod == nil {
			continue
		}
		validIDs[pod.ID] = true
		for _, e := range entries {
			if e.ContainerID == pod.ID {
				valid[e.Network] = append(valid[e.Network], types.GCAttachment{ContainerID: pod.ID, IfName: e.IfName})
			}
		}
		if len(pod.Networks) > 0 {
			atts, err := assignIfnames(pod.Networks, "")
			if err != nil {
				errs = append(errs, fmt.Errorf("valid pod %s: %w", pod.ID, err))
				continue
			}
			for _, a := range atts {
				valid[a.Name] = appendUnique(valid[a.Name], types.GCAttachment{ContainerID: pod.ID, IfName: a.Ifname})
			}
		}
	}

	// Stale attachments: DEL with the cached config.
	for _, e := range entries {
		if validIDs[e.ContainerID] || containsAttachment(valid[e.Network], e.ContainerID, e.IfName) {
			log.WithFields(logrus.Fields{"network": e.Network, "sandbox": e.ContainerID, "ifname": e.IfName}).
				Debug("Keeping attachment of a valid pod")
			continue
		}
		pod := &PodNetwork{ID: e.ContainerID, NetNS: e.NetNS}
		att := NetAttachment{Name: e.Network, Ifname: e.IfName}
		p, err := m.planFor(pod, att, e, set)
		if err != nil {
			errs = append(errs, &NetworkError{Network: e.Network, IfName: e.IfName, Verb: "DEL", Err: err})
			continue
		}
		elog := log.WithFields(logrus.Fields{"sandbox": e.ContainerID})
		for _, o := range m.deleteAll(ctx, []*plan{p}, elog, "gc") {
			if o.Failure() {
				errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
			}
		}
		if err := m.cache.RemoveOrder(e.ContainerID); err != nil {
			log.WithError(err).Debug("Cannot remove attachment order record")
		}
	}

	// The GC verb, for networks that support it.
	for _, name := range m.Networks() {
		n := set.byName[name]
		if n == nil || n.list.DisableGC {
			continue
		}
		if ok, _ := version.GreaterThanOrEqualTo(n.list.CNIVersion, "1.1.0"); !ok {
			continue
		}
		va := valid[name]
		if va == nil {
			va = []types.GCAttachment{} // never nil: nil means "delete everything"
		}
		if err := m.gcVerb(ctx, n.list, va); err != nil {
			errs = append(errs, &NetworkError{Network: name, Verb: "GC", Err: err})
		}
	}
	return errors.Join(errs...)
}

// gcVerb sends GC to every plugin of the list with the valid attachments.
func (m *Manager) gcVerb(ctx context.Context, list *libcni.NetworkConfigList, valid []types.GCAttachment) error {
	inject := map[string]interface{}{
		"name":                      list.Name,
		"cniVersion":                list.CNIVersion,
		"cni.dev/valid-attachments": valid,
		"cni.dev/attachments":       valid, // the name an earlier spec draft used
	}
	var errs []error
	for _, p := range list.Plugins {
		conf, err := libcni.InjectConf(p, inject)
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
			continue
		}
		path, err := m.exec.FindInPath(p.Network.Type, m.opts.binDirs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		args := &invoke.Args{Command: "GC", Path: joinPath(m.opts.binDirs)}
		if err := invoke.ExecPluginWithoutResult(ctx, path, conf.Bytes, args, m.exec); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %w", p.Network.Type, err))
		}
	}
	return errors.Join(errs...)
}

func appendUnique(list []types.GCAttachment, a types.GCAttachment) []types.GCAttachment {
	for _, x := range list {
		if x == a {
			return list
		}
	}
	return append(list, a)
}

func containsAttachment(list []types.GCAttachment, id, ifname string) bool {
	for _, x := range list {
		if x.ContainerID == id && x.IfName == ifname {
			return true
		}
	}
	return false
}
