package cni

import (
	"context"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Remove detaches the sandbox from every network it is attached to,
// whatever is loaded now and whatever the last Load returned: the engine
// finds the attachments in libcni's cache and in its own order record, and
// runs DEL with the config cached at ADD, so a network whose file is gone
// is detached too. DELs run in the reverse order of the ADDs and never
// stop at a failure; duplicate interface names in the cache are
// tolerated. A DEL that fails is retried in the background (see
// [ocicni.WithHealing]).
//
// The error names every failed network and matches *[ocicni.TeardownError]
// with errors.As. path may be empty when the namespace is gone.
func (f *Face) Remove(ctx context.Context, id string, path string, opts ...NamespaceOpts) (err error) {
	ctx, op := f.startVerb(ctx, "Remove", id)
	defer func() { endVerb(ctx, op, err) }()
	ns, err := newNamespace(id, path, opts)
	if err != nil {
		return err
	}
	f.mu.RLock()
	nets := f.cfg.networks
	f.mu.RUnlock()
	pod := ns.podNetwork(nets)
	pod.Networks = nil // every attachment the engine knows of, not only the loaded ones
	_, err = f.engine.TearDownPodOutcomes(ctx, pod)
	return err
}

// GC detaches every sandbox not in validSandboxes (sandbox IDs) from the
// loaded networks, from the cache, and then sends the GC verb to the
// loaded networks at CNI 1.1.0 or later. See [ocicni.Manager.GC]. It is an
// addition to go-cni's API.
//
// Like libcni's GCNetworkList, it acts only on the attachments of the
// networks loaded when it runs (the engine runs with
// [ocicni.WithGCScopedToLoadedNetworks]): the sandboxes that other
// runtimes attached to their networks in a shared cache dir (the default
// one, /var/lib/cni) keep their attachments, cache entries and order
// records, and GC reports nothing of them. Attachments of a network that
// is no longer loaded are not collected; [Face.Remove] still detaches a
// sandbox from them.
func (f *Face) GC(ctx context.Context, validSandboxes []string) (err error) {
	ctx, op := f.startVerb(ctx, "GC", "")
	defer func() { endVerb(ctx, op, err) }()
	valid := make([]*ocicni.PodNetwork, 0, len(validSandboxes))
	for _, id := range validSandboxes {
		valid = append(valid, &ocicni.PodNetwork{ID: id})
	}
	return f.engine.GC(ctx, valid)
}
