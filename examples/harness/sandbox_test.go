package harness

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// newPod returns a pod in a fake netns of env; no root is needed.
func newPod(t *testing.T, env *ocicnitest.Env, id string, networks ...string) ocicni.PodNetwork {
	t.Helper()
	pod := ocicni.PodNetwork{Name: "web", Namespace: "default", ID: id, NetNS: env.NetNS(t, id)}
	for _, n := range networks {
		pod.Networks = append(pod.Networks, ocicni.NetAttachment{Name: n})
	}
	return pod
}

func TestStartSandboxReturnsIP(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge", "portmap")
	m := env.NewManager(t)

	ip, err := StartSandbox(context.Background(), m, newPod(t, env, "pod1"))
	require.NoError(t, err)
	assert.Equal(t, "10.88.0.2", ip) // the first host after the gateway of ocicnitest.DefaultSubnet

	var calls []string
	for _, c := range env.Exec.Calls() {
		calls = append(calls, c.String()+" "+c.PluginType)
	}
	assert.Equal(t, []string{"ADD podnet eth0 pod1 bridge", "ADD podnet eth0 pod1 portmap"}, calls)
}

// retryOnce wraps the manager so that a test can change the plugins'
// script between StopSandbox's first teardown and its retry.
type retryOnce struct {
	ocicni.CNIPlugin
	afterFirst func()
	teardowns  int
}

func (r *retryOnce) TearDownPodWithContext(ctx context.Context, pod ocicni.PodNetwork) error {
	err := r.CNIPlugin.TearDownPodWithContext(ctx, pod)
	r.teardowns++
	if r.teardowns == 1 && r.afterFirst != nil {
		r.afterFirst()
	}
	return err
}

func TestStopSandboxRetries(t *testing.T) {
	busy := &types.Error{Code: types.ErrTryAgainLater, Msg: "busy"}
	tests := []struct {
		name      string
		failDEL   *types.Error
		recovers  bool // the plugin stops failing after the first teardown
		wantErr   bool
		teardowns int
		dels      []string // the retry runs every DEL again: DEL is idempotent
	}{
		{
			name:      "code 11 once: retried and deleted",
			failDEL:   busy,
			recovers:  true,
			teardowns: 2,
			dels:      []string{"DEL storage eth1 pod1", "DEL podnet eth0 pod1", "DEL storage eth1 pod1", "DEL podnet eth0 pod1"},
		},
		{
			name:      "code 11 twice: retried once, then given up",
			failDEL:   busy,
			wantErr:   true,
			teardowns: 2,
			dels:      []string{"DEL storage eth1 pod1", "DEL podnet eth0 pod1", "DEL storage eth1 pod1", "DEL podnet eth0 pod1"},
		},
		{
			name:      "other code: not retried",
			failDEL:   &types.Error{Code: types.ErrInternal, Msg: "broken"},
			wantErr:   true,
			teardowns: 1,
			dels:      []string{"DEL storage eth1 pod1", "DEL podnet eth0 pod1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ocicnitest.NewEnv(t)
			env.WriteConflist(t, "podnet", "1.0.0", "bridge")
			env.WriteConflist(t, "storage", "1.0.0", "bridge")
			m := &retryOnce{CNIPlugin: env.NewManager(t)}
			pod := newPod(t, env, "pod1", "podnet", "storage")
			_, err := StartSandbox(context.Background(), m, pod)
			require.NoError(t, err)

			env.Exec.Fail("storage", "DEL", tt.failDEL)
			if tt.recovers {
				m.afterFirst = func() { env.Exec.Clear("storage", "DEL") }
			}
			err = StopSandbox(context.Background(), m, pod)

			if tt.wantErr {
				var perr *types.Error
				require.ErrorAs(t, err, &perr)
				assert.Equal(t, tt.failDEL.Code, perr.Code)
				var terr *ocicni.TeardownError
				require.ErrorAs(t, err, &terr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.teardowns, m.teardowns)
			assert.Equal(t, tt.dels, callStrings(env.Exec.Calls("DEL")))
		})
	}
}

func TestStartSandboxRollsBackFailedAdd(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "podnet", "1.0.0", "bridge")
	env.WriteConflist(t, "storage", "1.0.0", "bridge")
	m := env.NewManager(t)
	env.Exec.Fail("storage", "ADD", &types.Error{Code: types.ErrInternal, Msg: "no addresses left"})

	ip, err := StartSandbox(context.Background(), m, newPod(t, env, "pod1", "podnet", "storage"))

	require.Error(t, err)
	assert.Empty(t, ip)
	var serr *ocicni.SetupError
	require.ErrorAs(t, err, &serr)
	assert.Nil(t, serr.Rollback, "the rollback succeeded")
	var perr *types.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, uint(types.ErrInternal), perr.Code)
	// Both ADDs ran; the rollback deleted both attachments, the one that
	// failed too, since a failed ADD may have left something behind.
	assert.Equal(t, []string{
		"ADD podnet eth0 pod1",
		"ADD storage eth1 pod1",
		"DEL storage eth1 pod1",
		"DEL podnet eth0 pod1",
	}, callStrings(env.Exec.Calls("ADD", "DEL")))
}

func callStrings(calls []ocicnitest.Call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.String())
	}
	return out
}
