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
