package ocicni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// recordingNetNS is a NetNSOps that records its calls and fails
// LoopbackUp with upErr.
type recordingNetNS struct {
	upErr error

	mu    sync.Mutex
	calls []string
}

func (r *recordingNetNS) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recordingNetNS) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recordingNetNS) LoopbackUp(_ context.Context, p string) error {
	r.record("up " + p)
	return r.upErr
}

func (r *recordingNetNS) LoopbackCheck(_ context.Context, p string) error {
	r.record("check " + p)
	return nil
}

func (r *recordingNetNS) InterfaceAddrs(_ context.Context, p, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	r.record("addrs " + p + " " + ifname)
	return nil, nil, errors.New("not faked")
}

func TestWithNetNSOpsNil(t *testing.T) {
	m, err := New(WithNetNSOps(nil), WithoutWatcher(), WithConfDir(t.TempDir()))
	require.NoError(t, err, "nil means the default")
	assert.Equal(t, kernelNetNS{}, m.setup.opts.netns)
	assert.Equal(t, kernelNetNS{}, m.status.opts.netns)
	require.NoError(t, m.Shutdown())
}

// A replaced NetNSOps is what setup and status call, with the request's
// netns path; the netns path is still validated first, and a LoopbackUp
// failure stops setup before any plugin runs or anything is recorded.
func TestWithNetNSOpsReplacesNetnsWork(t *testing.T) {
	env := newFakeEnv(t)
	cacheDir, nsPath, root := env.cacheDir, env.nsPath, filepath.Dir(env.nsPath)
	newManager := func(ops NetNSOps) (*Manager, *fakecni.Exec) {
		return env.manager(t, WithNetNSOps(ops), WithStatusAlwaysChecks())
	}
	ctx := context.Background()
	// attached sets pod id up through a manager whose NetNSOps records
	// its calls.
	attached := func(t *testing.T, id string) (*recordingNetNS, *Manager, *fakecni.Exec, PodNetwork) {
		t.Helper()
		ops := &recordingNetNS{}
		m, fx := newManager(ops)
		pod := PodNetwork{Name: "p", Namespace: "ns", ID: id, NetNS: nsPath}
		_, err := m.SetUpPodWithContext(ctx, pod)
		require.NoError(t, err)
		return ops, m, fx, pod
	}

	t.Run("setup and status", func(t *testing.T) {
		ops, m, fx, pod := attached(t, "ok")
		_, err := m.GetPodNetworkStatusWithContext(ctx, pod)
		require.NoError(t, err, "status of the cached result")
		require.NoError(t, cache.New(cacheDir).Remove("net", "ok", "eth0"))
		_, err = m.GetPodNetworkStatusWithContext(ctx, pod)
		require.Error(t, err, "without a cached result status reads the netns")
		assert.Equal(t, []string{"up " + nsPath, "check " + nsPath, "check " + nsPath, "addrs " + nsPath + " eth0"}, ops.recorded())
		assert.Len(t, fx.Calls(), 2, "ADD and CHECK")

		_, err = m.SetUpPodWithContext(ctx, PodNetwork{Name: "p", Namespace: "ns", ID: "missing", NetNS: filepath.Join(root, "gone")})
		require.ErrorIs(t, err, ErrInvalidArgument, "a missing netns is still rejected")
		assert.Len(t, ops.recorded(), 4)
	})

	// A failure to bring up lo leaves no record and no link to a saved
	// config; with an earlier record of the sandbox, that record and its
	// link stay.
	t.Run("LoopbackUp fails", func(t *testing.T) {
		boom := errors.New("boom")
		m, fx := newManager(&recordingNetNS{upErr: boom})
		c := cache.New(cacheDir)
		savedBefore := savedConfigs(t, c)
		_, err := m.SetUpPodWithContext(ctx, PodNetwork{Name: "p", Namespace: "ns", ID: "failing", NetNS: nsPath})
		require.ErrorIs(t, err, boom)
		assert.Empty(t, fx.Calls(), "no plugin ran")
		order, err := c.ReadOrder("failing")
		require.NoError(t, err)
		assert.Nil(t, order, "no order recorded")
		assert.Equal(t, savedBefore, savedConfigs(t, c), "no link to a saved config, no new copy")
	})

	t.Run("LoopbackUp fails with an earlier record", func(t *testing.T) {
		ops, m, fx, pod := attached(t, "again")
		c := cache.New(cacheDir)
		before, err := c.ReadOrder("again")
		require.NoError(t, err)
		require.Len(t, before, 1)
		savedBefore := savedConfigs(t, c)
		// Without its cached result the attachment is not live: the next
		// setup would add it again and write the record anew.
		require.NoError(t, c.Remove("net", "again", "eth0"))

		boom := errors.New("boom")
		ops.upErr = boom
		_, err = m.SetUpPodWithContext(ctx, pod)
		require.ErrorIs(t, err, boom)
		assert.Len(t, fx.Calls(), 1, "only the first setup's ADD ran")
		after, err := c.ReadOrder("again")
		require.NoError(t, err)
		assert.Equal(t, before, after, "the earlier record stays as it was")
		assert.Equal(t, savedBefore, savedConfigs(t, c), "the earlier record's saved config and link stay")
	})
}

// savedConfigs lists the saved configs in c as "digest container links",
// sorted: what a setup that failed before ADD must leave as it found.
func savedConfigs(t *testing.T, c *cache.Cache) []string {
	t.Helper()
	saved, err := c.ListConfigs()
	require.NoError(t, err)
	out := make([]string, len(saved))
	for i, sc := range saved {
		out[i] = fmt.Sprintf("%s %q %d", sc.Digest, sc.ContainerID, sc.Links)
	}
	slices.Sort(out)
	return out
}
