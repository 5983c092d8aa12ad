package ocicni

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// OutcomeClass classifies the result of one DEL.
type OutcomeClass int

const (
	// Deleted means DEL succeeded.
	Deleted OutcomeClass = iota
	// AlreadyGone means the plugin reported the container unknown (code
	// 3): nothing was left to delete. It counts as success.
	AlreadyGone
	// NoConfig means the attachment had neither a loaded config nor a
	// cache entry, so no plugin could run. It is a warning, not an error.
	NoConfig
	// RetryLater means the DEL may succeed if retried: the plugin said
	// code 11, the deadline passed, or the plugin could not be started.
	RetryLater
	// Failed is any other failure.
	Failed
	// Orphaned means the attachment may exist (a cache entry or the
	// attachment order record names it) but neither its cached config nor
	// a loaded one is usable, so no DEL could run. It is a failure: the
	// record is kept, and a teardown or GC after the config returns
	// deletes the attachment.
	Orphaned
)

func (c OutcomeClass) String() string {
	switch c {
	case Deleted:
		return "deleted"
	case AlreadyGone:
		return "already-gone"
	case NoConfig:
		return "no-config"
	case RetryLater:
		return "retry-later"
	case Failed:
		return "failed"
	case Orphaned:
		return "orphaned"
	}
	return fmt.Sprintf("OutcomeClass(%d)", int(c))
}

// Outcome is what happened to one attachment during a teardown, rollback
// or garbage collection.
type Outcome struct {
	ContainerID string
	Network     string
	IfName      string
	Class       OutcomeClass
	// Err is the cause for RetryLater, Failed, NoConfig and Orphaned, and the
	// tolerated plugin error for AlreadyGone.
	Err error
	// Policy is the teardown policy that applied to the attachment.
	Policy TeardownPolicy
	// Tolerated is true when a failure was only logged because the
	// policy is tolerant. Tolerated failures are not part of the error.
	Tolerated bool
}

// Failure reports whether the outcome is an error under strict policy.
func (o Outcome) Failure() bool {
	return o.Class == RetryLater || o.Class == Failed || o.Class == Orphaned
}

// classify maps a DEL error to an outcome class. It never looks at the
// error's text.
func classify(err error) OutcomeClass {
	if err == nil {
		return Deleted
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrPluginNotFound) {
		return RetryLater
	}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		switch cniErr.Code {
		case types.ErrUnknownContainer:
			return AlreadyGone
		case types.ErrTryAgainLater:
			return RetryLater
		}
		return Failed
	}
	if errors.Is(err, ErrNoConfig) {
		return NoConfig
	}
	var execErr *exec.Error
	if errors.As(err, &execErr) {
		return RetryLater
	}
	return Failed
}

// TeardownError reports every attachment whose DEL failed. Outcomes holds
// the outcome of every attachment, successful or not, in the order DEL ran.
// It unwraps to one *NetworkError per failure.
//
// A teardown ([Manager.TearDownPodWithContext] and the other teardowns):
//
//   - Every attachment gets its DEL, even after earlier ones failed.
//   - With PodNetwork.Networks empty, the attachments are the container's
//     libcni cache entries, deduplicated by (network, ifname). Two networks
//     that claim the same ifname are both deleted, with a warning. Requested
//     networks are deleted exactly as requested, never widened.
//   - DELs run in the reverse of the recorded ADD order. Attachments that
//     are missing from the record run first, by network then interface name,
//     descending.
//   - DEL uses the cached config and runtime args, so it works after the
//     config file changed or was removed, or with an empty conf dir.
//     Without a usable cache entry it uses the config saved with the order
//     record, else the loaded config. With none, an attachment that a
//     cache entry or the order record names is reported as [Orphaned], a
//     failure, and stays recorded until a config returns; any other is
//     [NoConfig], a warning.
//   - The order record (see [SandboxInventory]) is also the memory of
//     attachments that never reached libcni's cache (an ADD that failed
//     after an earlier plugin of its list attached, or a crash during ADD),
//     so they are deleted too, inside the netns recorded at ADD.
//   - A corrupt cache entry, or one whose result libcni cannot decode, is
//     deleted with the best config there is (the cached one when readable,
//     else the loaded one), but libcni never reads the file: its DEL would
//     block on a FIFO, read a huge file, drop the entry before running the
//     plugins, or panic. The file goes only after DEL succeeded. Without
//     any config it is reported as a failure.
//   - Each attachment's [Outcome] is classified: [Deleted], [AlreadyGone]
//     (code 3; counts as success), [RetryLater] (code 11, an expired
//     context, a plugin binary that is gone), [Failed] or [Orphaned].
//   - libcni stops a list's DEL at the first plugin that answers code 3,
//     so plugins before it in the list (bridge, host-local) get no DEL and
//     what they hold would leak. The spec allows it, but DEL is idempotent,
//     so by default the manager then runs DEL for every plugin of the list
//     itself, last to first, as single-plugin lists without prevResult:
//     the plugins before the code-3 plugin and those after it (again) all
//     get their DEL, and code 3 from any of them counts as success. The
//     attachment is [Deleted] once each DEL succeeded or answered code 3;
//     otherwise the first other failure is its outcome and its cache entry
//     stays. The same applies to rollbacks and GC. With
//     [WithDELStopAtUnknownContainer] the manager keeps libcni's behaviour:
//     the attachment is [AlreadyGone], a warning names the network, and GC
//     (the plugins' own, at CNI 1.1) must collect what those plugins kept.
//   - Under the [Strict] policy (the default) failures are returned as a
//     [TeardownError], which names each failed network and ifname and
//     unwraps to one [NetworkError] per failure, so errors.As reaches the
//     plugin's *types.Error. Under [Tolerant] they are logged and nil is
//     returned. Either way the failed attachments' cache entries are kept,
//     so a retry or GC still has their config. A network can override the
//     policy with the top-level key [TeardownPolicyKey] in its config file:
//     "ocicni.teardownPolicy": "tolerant".
//   - Teardown is idempotent, and a netns that was already deleted does not
//     stop the DELs that release IPAM reservations.
//   - A failed DEL is retried in the background (see [HealPolicy]).
//
// [Manager.TearDownPodOutcomes] returns the outcomes as values whatever the
// policy.
type TeardownError struct {
	ContainerID string
	Outcomes    []Outcome
}

// Failures returns the failed outcomes that were not tolerated.
func (e *TeardownError) Failures() []Outcome {
	var out []Outcome
	for _, o := range e.Outcomes {
		if o.Failure() && !o.Tolerated {
			out = append(out, o)
		}
	}
	return out
}

func (e *TeardownError) summary() string {
	parts := make([]string, 0, len(e.Outcomes))
	for _, o := range e.Failures() {
		parts = append(parts, fmt.Sprintf("network %q (ifname %q) %s: %v", o.Network, o.IfName, o.Class, o.Err))
	}
	return strings.Join(parts, "; ")
}

func (e *TeardownError) Error() string {
	return fmt.Sprintf("ocicni: tearing down pod %s: %s", e.ContainerID, e.summary())
}

// Unwrap returns a *NetworkError for every failed attachment.
func (e *TeardownError) Unwrap() []error {
	var errs []error
	for _, o := range e.Failures() {
		errs = append(errs, &NetworkError{Network: o.Network, IfName: o.IfName, Verb: "DEL", Err: o.Err})
	}
	return errs
}
