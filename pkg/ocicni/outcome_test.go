package ocicni

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want OutcomeClass
	}{
		{"nil", nil, Deleted},
		{"unknown container", fmt.Errorf("plugin x: %w", types.NewError(types.ErrUnknownContainer, "gone", "")), AlreadyGone},
		{"try again later", types.NewError(types.ErrTryAgainLater, "busy", ""), RetryLater},
		{"deadline", fmt.Errorf("%w: %w", context.DeadlineExceeded, &types.Error{Msg: "killed"}), RetryLater},
		{"binary gone", fmt.Errorf("%w: bridge", ErrPluginNotFound), RetryLater},
		{"plugin failure", types.NewError(types.ErrInternal, "boom", ""), Failed},
		{"crash", &types.Error{Msg: "netplugin failed"}, Failed},
		{"other", errors.New("x"), Failed},
		{"no config", ErrNoConfig, NoConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(tt.err))
		})
	}
}

func TestTeardownErrorUnwrapsEveryFailure(t *testing.T) {
	plugErr := types.NewError(types.ErrTryAgainLater, "busy", "")
	e := &TeardownError{ContainerID: "c", Outcomes: []Outcome{
		{Network: "a", IfName: "eth0", Class: Deleted},
		{Network: "b", IfName: "eth1", Class: RetryLater, Err: fmt.Errorf("plugin: %w", plugErr)},
		{Network: "c", IfName: "eth2", Class: Failed, Err: errors.New("boom")},
		{Network: "d", IfName: "eth3", Class: Failed, Err: errors.New("tolerated"), Tolerated: true},
	}}
	require.Len(t, e.Failures(), 2)
	assert.Contains(t, e.Error(), `network "b" (ifname "eth1") retry-later`)
	assert.Contains(t, e.Error(), `network "c"`)
	assert.NotContains(t, e.Error(), `network "d"`)

	var ce *types.Error
	require.ErrorAs(t, e, &ce)
	assert.Equal(t, uint(types.ErrTryAgainLater), ce.Code)
	var ne *NetworkError
	require.ErrorAs(t, e, &ne)
	assert.Equal(t, "b", ne.Network)
	assert.Equal(t, "DEL", ne.Verb)
}

func TestSortForTeardown(t *testing.T) {
	keys := []NetAttachment{
		{Name: "a", Ifname: "eth0"},
		{Name: "z", Ifname: "eth9"},
		{Name: "b", Ifname: "net1"},
		{Name: "dup", Ifname: "eth0"},
		{Name: "c", Ifname: "eth2"},
	}
	recorded := []cache.Attachment{{Network: "a", IfName: "eth0"}, {Network: "b", IfName: "net1"}, {Network: "c", IfName: "eth2"}}
	slots := make([]*knownAttachment, len(keys))
	for i, k := range keys {
		slots[i] = &knownAttachment{NetAttachment: k}
	}
	sortForTeardown(slots, recorded)
	keys = keys[:0]
	for _, s := range slots {
		keys = append(keys, s.NetAttachment)
	}
	assert.Equal(t, []NetAttachment{
		{Name: "z", Ifname: "eth9"}, {Name: "dup", Ifname: "eth0"}, // unrecorded, descending
		{Name: "c", Ifname: "eth2"}, {Name: "b", Ifname: "net1"}, {Name: "a", Ifname: "eth0"}, // reverse ADD order
	}, keys)
}
