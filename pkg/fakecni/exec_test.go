package fakecni_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// The default ADD result is at the config's version, and SandboxIPs finds
// its interface and IP.
func TestDefaultADDResult(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", ""} {
		t.Run("version "+v, func(t *testing.T) {
			f := fakecni.New()
			stdin := `{"cniVersion":"` + v + `","name":"net","type":"bridge"}`
			if v == "" {
				stdin = `{"name":"net","type":"bridge"}`
			}
			out, err := call(t, f, context.Background(), "ADD", stdin, nil)
			require.NoError(t, err)
			want := v
			if want == "" {
				want = "1.0.0"
			}
			assert.Contains(t, string(out), `"cniVersion":"`+want+`"`)

			res, err := resultOf(want, out)
			require.NoError(t, err)
			iface, ips, err := ocicni.SandboxIPs(ocicni.NetResult{Result: res, NetAttachment: ocicni.NetAttachment{Name: "net", Ifname: "eth0"}})
			require.NoError(t, err)
			assert.Equal(t, "eth0", iface.Name)
			assert.Equal(t, "/run/netns/ctr", iface.Sandbox)
			assert.Equal(t, "02:42:0a:58:00:02", iface.Mac)
			require.Len(t, ips, 1)
			assert.Equal(t, "10.88.0.2/16", ips[0].Address.String())
			assert.Equal(t, "10.88.0.1", ips[0].Gateway.String())
		})
	}
}

// A chained plugin passes its prevResult on.
func TestDefaultADDPassesPrevResult(t *testing.T) {
	f := fakecni.New()
	prev := `{"cniVersion":"1.0.0","ips":[{"address":"192.0.2.7/24"}]}`
	out, err := call(t, f, context.Background(), "ADD", `{"cniVersion":"1.0.0","name":"net","type":"portmap","prevResult":`+prev+`}`, nil)
	require.NoError(t, err)
	assert.JSONEq(t, prev, string(out))
}

func TestScripts(t *testing.T) {
	busy := &types.Error{Code: types.ErrTryAgainLater, Msg: "busy"}
	execErr := errors.New("exec format error")
	const custom = `{"cniVersion":"1.0.0","ips":[{"address":"198.51.100.9/24"}]}`
	for _, tc := range []struct {
		name    string
		script  func(f *fakecni.Exec)
		verb    string
		network string
		wantOut string // "" for no output check
		wantErr error
	}{
		{
			name: "Fail with a plugin error", script: func(f *fakecni.Exec) { f.Fail("net", "DEL", busy) },
			verb: "DEL", network: "net", wantErr: busy,
		},
		{
			name: "Fail with an exec error", script: func(f *fakecni.Exec) { f.Fail("net", "ADD", execErr) },
			verb: "ADD", network: "net", wantErr: execErr,
		},
		{
			name: "Fail another network", script: func(f *fakecni.Exec) { f.Fail("other", "DEL", busy) },
			verb: "DEL", network: "net",
		},
		{
			name: "Fail another verb", script: func(f *fakecni.Exec) { f.Fail("net", "ADD", busy) },
			verb: "DEL", network: "net",
		},
		{
			name: "Result", script: func(f *fakecni.Exec) { f.Result("net", "ADD", custom) },
			verb: "ADD", network: "net", wantOut: custom,
		},
		{name: "Result replaces Fail", script: func(f *fakecni.Exec) {
			f.Fail("net", "ADD", busy)
			f.Result("net", "ADD", custom)
		}, verb: "ADD", network: "net", wantOut: custom},
		{name: "Clear", script: func(f *fakecni.Exec) {
			f.Fail("net", "DEL", busy)
			f.Clear("net", "DEL")
		}, verb: "DEL", network: "net"},
		{
			name: "Fail VERSION with network empty", script: func(f *fakecni.Exec) { f.Fail("", "VERSION", execErr) },
			verb: "VERSION", network: "", wantErr: execErr,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakecni.New()
			tc.script(f)
			stdin := `{"cniVersion":"1.0.0","name":"` + tc.network + `","type":"bridge"}`
			if tc.network == "" {
				stdin = `{"cniVersion":"1.0.0"}`
			}
			out, err := call(t, f, context.Background(), tc.verb, stdin, nil)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.wantOut != "" {
				assert.JSONEq(t, tc.wantOut, string(out))
			}
		})
	}
}

func TestHang(t *testing.T) {
	const stdin = `{"cniVersion":"1.0.0","name":"net","type":"bridge"}`
	t.Run("until the context ends", func(t *testing.T) {
		f := fakecni.New()
		release := f.Hang("net", "ADD")
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := call(t, f, ctx, "ADD", stdin, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Len(t, f.Calls("ADD"), 1, "recorded before it hung")
	})
	t.Run("until released", func(t *testing.T) {
		f := fakecni.New()
		release := f.Hang("net", "ADD")
		f.Fail("net", "ADD", &types.Error{Code: 11, Msg: "busy"})
		path, err := f.FindInPath("bridge", []string{"/opt/cni/bin"})
		require.NoError(t, err)
		environ := (&invoke.Args{Command: "ADD", ContainerID: "ctr", IfName: "eth0", Path: "/opt/cni/bin"}).AsEnv()
		done := make(chan error, 1)
		go func() {
			_, err := f.ExecPlugin(context.Background(), path, []byte(stdin), environ)
			done <- err
		}()
		require.Eventually(t, func() bool { return len(f.Calls("ADD")) == 1 }, 5*time.Second, time.Millisecond)
		select {
		case err := <-done:
			require.FailNow(t, "returned while hung", "%v", err)
		default:
		}
		release()
		release() // twice is fine
		var perr *types.Error
		require.ErrorAs(t, <-done, &perr, "after release the other script answers")
		_, err = call(t, f, context.Background(), "DEL", stdin, nil)
		require.NoError(t, err, "other verbs never hung")
	})
}

func TestFindInPathAndVersion(t *testing.T) {
	paths := []string{"/opt/cni/bin", "/usr/libexec/cni"}
	f := fakecni.New()
	for _, tc := range []struct {
		name    string
		only    []string
		plugin  string
		paths   []string
		want    string
		wantErr bool
	}{
		{name: "any type by default", plugin: "whatever", paths: paths, want: "/opt/cni/bin/whatever"},
		{name: "listed type", only: []string{"bridge"}, plugin: "bridge", paths: paths, want: "/opt/cni/bin/bridge"},
		{name: "unlisted type", only: []string{"bridge"}, plugin: "macvlan", paths: paths, wantErr: true},
		{name: "no paths", plugin: "bridge", wantErr: true},
		{name: "slash in type", plugin: "../bridge", paths: paths, wantErr: true},
		{name: "empty type", plugin: "", paths: paths, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.OnlyPlugins(tc.only...)
			got, err := f.FindInPath(tc.plugin, tc.paths)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	f.OnlyPlugins()
	f.PluginVersions("old", "0.3.1", "0.4.0")
	for typ, want := range map[string][]string{"old": {"0.3.1", "0.4.0"}, "new": nil} {
		info, err := invoke.GetVersionInfo(context.Background(), "/opt/cni/bin/"+typ, f)
		require.NoError(t, err)
		if want == nil {
			assert.Contains(t, info.SupportedVersions(), "1.1.0")
			continue
		}
		assert.Equal(t, want, info.SupportedVersions())
	}
	assert.Len(t, f.Calls("VERSION"), 2)
	assert.Empty(t, f.Calls(), "VERSION only when asked for")
}

// The manager skips networks whose plugins are missing or too old, as with
// real binaries.
func TestManagerSeesPluginsAndVersions(t *testing.T) {
	env := ocicnitest.NewEnv(t)
	env.Exec.OnlyPlugins("bridge", "old")
	env.Exec.PluginVersions("old", "0.4.0")
	env.WriteConflist(t, "good", "1.0.0", "bridge")
	missing := env.WriteConflist(t, "missing", "1.0.0", "macvlan")
	tooNew := env.WriteConflist(t, "toonew", "1.0.0", "old")
	m := env.NewManager(t)

	skipped := map[string]error{}
	for _, s := range m.Skipped() {
		skipped[s.File] = s
	}
	require.ErrorIs(t, skipped[missing], ocicni.ErrPluginNotFound)
	require.ErrorIs(t, skipped[tooNew], ocicni.ErrUnsupportedVersion)
	assert.Len(t, skipped, 2)
	assert.Equal(t, "good", m.GetDefaultNetworkName())
}

func TestCallRecord(t *testing.T) {
	f := fakecni.New()
	const stdin = `{"cniVersion":"1.0.0","name":"net","type":"bridge","runtimeConfig":{"portMappings":[]}}`
	_, err := call(t, f, context.Background(), "CHECK", stdin,
		[][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_NAMESPACE", "ns"}})
	require.NoError(t, err)
	_, err = call(t, f, context.Background(), "DEL", `not json`, nil)
	require.NoError(t, err, "bad stdin still gets the default answer")

	calls := f.Calls()
	require.Len(t, calls, 2)
	c := calls[0]
	assert.Equal(t, "CHECK", c.Verb)
	assert.Equal(t, "net", c.Network)
	assert.Equal(t, "bridge", c.PluginType)
	assert.Equal(t, "/opt/cni/bin/bridge", c.PluginPath)
	assert.Equal(t, "ctr", c.ContainerID)
	assert.Equal(t, "/run/netns/ctr", c.NetNS)
	assert.Equal(t, "eth0", c.IfName)
	assert.Equal(t, "/opt/cni/bin", c.Path)
	assert.Equal(t, map[string]string{"IgnoreUnknown": "1", "K8S_POD_NAME": "web", "K8S_POD_NAMESPACE": "ns"}, c.Args)
	assert.JSONEq(t, stdin, string(c.Stdin))
	assert.Equal(t, map[string]any{"portMappings": []any{}}, c.Config["runtimeConfig"])
	assert.Equal(t, "CHECK net eth0 ctr", c.String())
	assert.Nil(t, c.ValidAttachments())

	bad := calls[1]
	assert.Nil(t, bad.Config)
	assert.Empty(t, bad.Network)
	assert.Equal(t, map[string]string{}, bad.Args)
	assert.Equal(t, "DEL eth0 ctr", bad.String())

	f.ResetCalls()
	assert.Empty(t, f.Calls())
}

func TestSubnets(t *testing.T) {
	f := fakecni.New()
	f.Subnet("tiny", netip.MustParsePrefix("192.0.2.0/30"))
	f.Subnet("six", netip.MustParsePrefix("2001:db8::/64"))
	add := func(network string) (string, error) {
		out, err := call(t, f, context.Background(), "ADD", `{"cniVersion":"1.0.0","name":"`+network+`","type":"bridge"}`, nil)
		if err != nil {
			return "", err
		}
		res, err := resultOf("1.0.0", out)
		require.NoError(t, err)
		_, ips, err := ocicni.SandboxIPs(ocicni.NetResult{Result: res, NetAttachment: ocicni.NetAttachment{Name: network, Ifname: "eth0"}})
		require.NoError(t, err)
		return ips[0].Address.String(), nil
	}
	for _, tc := range []struct{ network, want string }{
		{"a", "10.88.0.2/16"},
		{"b", "10.88.0.3/16"}, // the default pool is shared
		{"tiny", "192.0.2.2/30"},
		{"tiny", "192.0.2.3/30"},
		{"six", "2001:db8::2/64"},
		{"a", "10.88.0.4/16"},
	} {
		got, err := add(tc.network)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.network)
	}
	_, err := add("tiny")
	var perr *types.Error
	require.ErrorAs(t, err, &perr, "an exhausted subnet fails ADD")
	assert.Equal(t, uint(types.ErrTryAgainLater), perr.Code)

	assert.Panics(t, func() { f.Subnet("bad", netip.Prefix{}) })
}

func resultOf(version string, out []byte) (types.Result, error) {
	return create.Create(version, out)
}
