package telemetry

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// OutcomeOf classifies err, an operation's or a plugin run's, as
// [AttrOutcome] takes it. It never looks at the error's text.
func OutcomeOf(err error) string {
	var cniErr *types.Error
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, netconf.ErrPluginNotFound):
		return OutcomeNotFound
	case errors.Is(err, pluginexec.ErrOutputLimit):
		return OutcomeOutputLimit
	case errors.As(err, &cniErr):
		return OutcomePluginError
	}
	return OutcomeError
}
