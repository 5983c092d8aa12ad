package telemetry

import (
	"context"
	"fmt"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// The outcome classes come from the errors' types, never their text.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, OutcomeOK},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), OutcomeTimeout},
		{fmt.Errorf("x: %w", context.Canceled), OutcomeCanceled},
		{fmt.Errorf("x: %w", netconf.ErrPluginNotFound), OutcomeNotFound},
		{&pluginexec.OutputLimitError{}, OutcomeOutputLimit},
		{fmt.Errorf("DEL of n: %w", &types.Error{Code: 11}), OutcomePluginError},
		{fmt.Errorf("%w: and %w", context.DeadlineExceeded, &types.Error{Code: 11}), OutcomeTimeout},
		{fmt.Errorf("plugin_error timeout not_found"), OutcomeError},
	} {
		assert.Equal(t, tc.want, OutcomeOf(tc.err), "%v", tc.err)
	}
}
