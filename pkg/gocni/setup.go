package cni

import (
	"context"
	"fmt"
)

// Setup attaches the sandbox id, whose network namespace is path, to every
// loaded network, one after the other in load order (the CNI spec allows
// no parallel operations on one container, so Setup does not attach in
// parallel as go-cni's does). Network i gets its interface name from the
// load (eth0, eth1, ...); the loopback network is lo, which the engine
// sets up without a plugin.
//
// When a network's ADD fails, the engine runs DEL for it and for every
// network attached before it, in reverse order, and Setup returns an
// error that matches *[ocicni.SetupError] with errors.As. A Setup of a
// sandbox that is set up already (a retry, or two callers racing) runs no
// ADD for what it holds: an identical request gets the first result, a
// different one an error matching [ocicni.ErrAttachmentLive] (see
// [ocicni.AttachedError]). With fewer
// networks loaded than [WithMinNetworkCount] asks for, Setup first runs
// the last load again, then fails with [ErrCNINotInitialized].
func (f *Face) Setup(ctx context.Context, id string, path string, opts ...NamespaceOpts) (_ *Result, err error) {
	ctx, op := f.startVerb(ctx, "Setup", id)
	defer func() { endVerb(ctx, op, err) }()
	nets, prefix, err := f.ready()
	if err != nil {
		return nil, err
	}
	ns, err := newNamespace(id, path, opts)
	if err != nil {
		return nil, err
	}
	pod := ns.podNetwork(nets)
	if len(pod.Networks) == 0 {
		return nil, fmt.Errorf("gocni: no network loaded besides loopback: %w", ErrNotFound)
	}
	got, err := f.engine.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return nil, err
	}
	results, err := networkResults(nets, got, path)
	if err != nil {
		return nil, err
	}
	return combine(prefix, results)
}

// SetupSerially is [Face.Setup]: both attach one network after the other.
func (f *Face) SetupSerially(ctx context.Context, id string, path string, opts ...NamespaceOpts) (*Result, error) {
	return f.Setup(ctx, id, path, opts...)
}

// Check runs CHECK for the sandbox on every loaded network whose version
// supports it, through the engine's pod status, and checks that lo is up.
func (f *Face) Check(ctx context.Context, id string, path string, opts ...NamespaceOpts) (err error) {
	ctx, op := f.startVerb(ctx, "Check", id)
	defer func() { endVerb(ctx, op, err) }()
	nets, _, err := f.ready()
	if err != nil {
		return err
	}
	ns, err := newNamespace(id, path, opts)
	if err != nil {
		return err
	}
	pod := ns.podNetwork(nets)
	if len(pod.Networks) == 0 {
		return nil
	}
	_, err = f.engine.GetPodNetworkStatusWithContext(ctx, pod)
	return err
}

// Status returns [ErrCNINotInitialized] while fewer networks are loaded
// than [WithMinNetworkCount] asks for (after running the last load again),
// and otherwise the first STATUS error of a loaded network at CNI 1.1.0 or
// later.
func (f *Face) Status() (err error) {
	ctx, op := f.startVerb(context.Background(), "Status", "")
	defer func() { endVerb(ctx, op, err) }()
	if _, _, err := f.ready(); err != nil {
		return err
	}
	for _, st := range f.engine.NetworkStatuses(ctx) {
		if st.Err != nil {
			return st.Err
		}
	}
	return nil
}
