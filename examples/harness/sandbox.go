// Package harness is the code a container runtime writes around ocicni,
// and, in sandbox_test.go, the unit tests that check it without root and
// without plugin binaries, through package ocicnitest.
//
// Copy sandbox_test.go's pattern: an ocicnitest.Env plays the conf dir,
// the cache and every plugin; the test scripts a plugin's answer with
// FakeExec.Fail or FakeExec.Result and reads back the calls it made.
package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// errNoIP is returned when the default network's result has no address.
var errNoIP = errors.New("harness: no IP in the default network's result")

// StartSandbox attaches the pod to its networks and returns its IP on the
// first one (the default network when pod.Networks is empty). A failed
// setup has already been rolled back by the manager.
func StartSandbox(ctx context.Context, m ocicni.CNIPlugin, pod ocicni.PodNetwork) (ip string, err error) {
	results, err := m.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return "", fmt.Errorf("start sandbox %s: %w", pod.ID, err)
	}
	if len(results) == 0 {
		return "", fmt.Errorf("start sandbox %s: %w", pod.ID, errNoIP)
	}
	_, ips, err := ocicni.SandboxIPs(results[0])
	if err != nil {
		return "", fmt.Errorf("start sandbox %s: %w", pod.ID, err)
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("start sandbox %s: %w", pod.ID, errNoIP)
	}
	return ips[0].Address.IP.String(), nil
}

// StopSandbox detaches the pod. When a plugin answers DEL with code 11
// (try again later) it tries once more; DEL is idempotent, so the
// attachments already deleted are not harmed. Any other error is returned
// as it is.
func StopSandbox(ctx context.Context, m ocicni.CNIPlugin, pod ocicni.PodNetwork) error {
	err := m.TearDownPodWithContext(ctx, pod)
	if tryAgainLater(err) {
		err = m.TearDownPodWithContext(ctx, pod)
	}
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", pod.ID, err)
	}
	return nil
}

// tryAgainLater reports whether err carries a plugin error with code 11.
func tryAgainLater(err error) bool {
	var perr *types.Error
	return errors.As(err, &perr) && perr.Code == types.ErrTryAgainLater
}
