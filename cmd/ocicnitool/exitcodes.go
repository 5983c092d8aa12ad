package main

import (
	"errors"
	"flag"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Exit codes. They are part of the command's interface: scripts branch on
// them, and exitCodesHelp documents them.
const (
	exitOK       = 0 // the command did what it was asked
	exitUsage    = 1 // bad flags or arguments; nothing ran
	exitNotFound = 2 // no such network (or no default network), container (in the cache) or netns
	exitFailed   = 3 // an operation failed
	exitPartial  = 4 // teardown: some attachments deleted, some failed
)

const exitCodesHelp = `Exit codes:
  0  ok
  1  usage error: bad flags or arguments (nothing ran)
  2  not found: no such network (or no default network), netns, or container in the cache
  3  failed
  4  partial teardown: some attachments were deleted, some failed
`

// exitError is an error that carries the exit code it must end the
// command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode gives err the exit code code; a nil err stays nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErr and notFound build errors with those exit codes.
func usageErr(err error) error { return withCode(exitUsage, err) }

func notFound(err error) error { return withCode(exitNotFound, err) }

// exitCode maps an error to the command's exit code. An explicit code
// (withCode) wins; otherwise the library's sentinels decide, matched with
// errors.Is, never by text.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, ocicni.ErrNetworkNotFound), errors.Is(err, ocicni.ErrNoDefaultNetwork):
		return exitNotFound
	case errors.Is(err, ocicni.ErrInvalidArgument), errors.Is(err, cache.ErrInvalidName):
		return exitUsage
	}
	return exitFailed
}
