package ocicni

import (
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreshAdds(t *testing.T) {
	t.Parallel()
	planOf := func(network, config string) *plan {
		return &plan{NetAttachment: NetAttachment{Name: network, Ifname: "eth0"}, list: &libcni.NetworkConfigList{Bytes: []byte(config)}}
	}
	for _, tc := range []struct {
		name   string
		window time.Duration
		do     func(f *freshAdds)
		ask    *plan
		want   bool
	}{
		{name: "just added", window: time.Hour, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")) }, ask: planOf("n", "c1"), want: true},
		{name: "another config", window: time.Hour, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")) }, ask: planOf("n", "c2")},
		{name: "another network", window: time.Hour, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")) }, ask: planOf("m", "c1")},
		{name: "torn down", window: time.Hour, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")); f.forget("a") }, ask: planOf("n", "c1")},
		{name: "added again with another config", window: time.Hour, do: func(f *freshAdds) {
			f.add("a", planOf("n", "c1"))
			f.add("a", planOf("n", "c2"))
		}, ask: planOf("n", "c2"), want: true},
		{name: "window passed", window: time.Nanosecond, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")) }, ask: planOf("n", "c1")},
		{name: "off", window: 0, do: func(f *freshAdds) { f.add("a", planOf("n", "c1")) }, ask: planOf("n", "c1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFreshAdds(tc.window)
			tc.do(f)
			time.Sleep(time.Microsecond) // past a nanosecond's window
			assert.Equal(t, tc.want, f.fresh("a", tc.ask))
		})
	}
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		f := newFreshAdds(time.Hour)
		for i := range maxFresh + 10 {
			f.add(string(rune('a'+i%26))+time.Duration(i).String(), planOf("n", "c"))
		}
		require.Len(t, f.added, maxFresh, "none is old enough to drop: the rest are not remembered")
	})
}

// A status right after a setup answers from the ADD's result: no CHECK
// runs, and it reports the addresses the setup did. With
// WithStatusAlwaysChecks, and for a sandbox torn down and set up again by
// another manager, CHECK runs.
func TestStatusRightAfterSetup(t *testing.T) {
	t.Parallel()
	for _, always := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "always checks"}[always], func(t *testing.T) {
			t.Parallel()
			e := newITEnv(t)
			e.recordedBridge("net", nil)
			var opts []Option
			if always {
				opts = append(opts, WithStatusAlwaysChecks())
			}
			m := e.start(opts...)
			pod := e.pod("p")
			res, err := m.SetUpPodWithContext(e.ctx(), pod)
			require.NoError(t, err)
			st, err := m.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err)
			_, want, err := SandboxIPs(res[0])
			require.NoError(t, err)
			_, got, err := SandboxIPs(st[0])
			require.NoError(t, err)
			assert.Equal(t, want[0].Address.String(), got[0].Address.String())
			if always {
				assert.Len(t, e.calls("CHECK"), 1, "CHECK ran")
			} else {
				assert.Empty(t, e.calls("CHECK"), "answered from the ADD's result")
			}

			other := e.restart(opts...) // another manager: nothing fresh
			_, err = other.GetPodNetworkStatusWithContext(e.ctx(), pod)
			require.NoError(t, err)
			assert.Len(t, e.calls("CHECK"), map[bool]int{false: 1, true: 2}[always], "another manager runs CHECK")
			require.NoError(t, other.TearDownPodWithContext(e.ctx(), pod))
			e.assertClean(pod, "net")
		})
	}
}
