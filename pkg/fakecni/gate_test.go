package fakecni_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// call runs one plugin call through the fake as libcni's invoke would.
func call(t *testing.T, f *fakecni.Exec, ctx context.Context, verb, stdin string, args [][2]string) ([]byte, error) {
	t.Helper()
	path, err := f.FindInPath("bridge", []string{"/opt/cni/bin"})
	require.NoError(t, err)
	env := (&invoke.Args{
		Command: verb, ContainerID: "ctr", NetNS: "/run/netns/ctr", IfName: "eth0",
		PluginArgs: args, Path: "/opt/cni/bin",
	}).AsEnv()
	return f.ExecPlugin(ctx, path, []byte(stdin), env)
}

// callAsync runs call in a goroutine and returns its error channel.
func callAsync(t *testing.T, f *fakecni.Exec, ctx context.Context, verb, stdin string) <-chan error {
	t.Helper()
	path, err := f.FindInPath("bridge", []string{"/opt/cni/bin"})
	require.NoError(t, err)
	env := (&invoke.Args{Command: verb, ContainerID: "ctr", IfName: "eth0", Path: "/opt/cni/bin"}).AsEnv()
	done := make(chan error, 1)
	go func() {
		_, err := f.ExecPlugin(ctx, path, []byte(stdin), env)
		done <- err
	}()
	return done
}

func TestGate(t *testing.T) {
	const stdin = `{"cniVersion":"1.0.0","name":"net","type":"bridge"}`
	t.Run("holds the selected calls until released", func(t *testing.T) {
		f := fakecni.New()
		g := f.Gate(fakecni.Match{Verb: "ADD", Network: "net"})
		t.Cleanup(g.Release)
		first := callAsync(t, f, context.Background(), "ADD", stdin)
		second := callAsync(t, f, context.Background(), "ADD", stdin)
		g.WaitEntered(t, 2)
		assert.Equal(t, 2, g.Entered())
		// Calls the gate does not select are not held.
		_, err := call(t, f, context.Background(), "DEL", stdin, nil)
		require.NoError(t, err)
		_, err = call(t, f, context.Background(), "ADD", `{"cniVersion":"1.0.0","name":"other","type":"bridge"}`, nil)
		require.NoError(t, err)
		select {
		case err := <-first:
			require.FailNow(t, "a held call returned", "%v", err)
		case err := <-second:
			require.FailNow(t, "a held call returned", "%v", err)
		default:
		}
		g.Release()
		g.Release() // twice is fine
		require.NoError(t, <-first)
		require.NoError(t, <-second)
		_, err = call(t, f, context.Background(), "ADD", stdin, nil)
		require.NoError(t, err, "a released gate holds nothing")
		assert.Equal(t, 3, g.Entered())
	})
	t.Run("a held call ends with its context", func(t *testing.T) {
		f := fakecni.New()
		g := f.Gate(fakecni.Match{Verb: "ADD"})
		t.Cleanup(g.Release)
		ctx, cancel := context.WithCancel(context.Background())
		done := callAsync(t, f, ctx, "ADD", stdin)
		g.WaitEntered(t, 1)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	t.Run("IgnoreContext holds past the context", func(t *testing.T) {
		f := fakecni.New()
		g := f.Gate(fakecni.Match{Verb: "ADD"}, fakecni.IgnoreContext())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := callAsync(t, f, ctx, "ADD", stdin)
		g.WaitEntered(t, 1)
		g.Release()
		// Had the gate given up on the context, the call would have
		// failed with it.
		require.NoError(t, <-done)
	})
	t.Run("scripts answer once released", func(t *testing.T) {
		f := fakecni.New()
		g := f.Gate(fakecni.Match{PluginType: "bridge"})
		boom := errors.New("boom")
		f.Fail("net", "CHECK", boom)
		done := callAsync(t, f, context.Background(), "CHECK", stdin)
		g.WaitEntered(t, 1)
		g.Release()
		require.ErrorIs(t, <-done, boom)
	})
}

func TestCountAndFailPlugin(t *testing.T) {
	f := fakecni.New()
	broken := errors.New("exec format error")
	f.FailPlugin("broken", "VERSION", broken)
	f.Result("", "VERSION", `{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}`)
	_, err := invoke.GetVersionInfo(context.Background(), "/opt/cni/bin/broken", f)
	require.ErrorIs(t, err, broken, "the plugin type's failure wins over the network's script")
	_, err = invoke.GetVersionInfo(context.Background(), "/opt/cni/bin/bridge", f)
	require.NoError(t, err)
	_, err = call(t, f, context.Background(), "ADD", `{"cniVersion":"1.0.0","name":"net","type":"bridge"}`, nil)
	require.NoError(t, err)

	assert.Equal(t, 1, f.Count(fakecni.Match{Verb: "VERSION", PluginType: "broken"}))
	assert.Equal(t, 2, f.Count(fakecni.Match{Verb: "VERSION"}))
	assert.Equal(t, 1, f.Count(fakecni.Match{Network: "net"}))
	assert.Equal(t, 3, f.Count(fakecni.Match{}), "the zero Match counts every call")

	f.FailPlugin("broken", "VERSION", nil)
	_, err = invoke.GetVersionInfo(context.Background(), "/opt/cni/bin/broken", f)
	require.NoError(t, err, "a nil error clears the failure")
	f.ResetCalls()
	assert.Zero(t, f.Count(fakecni.Match{}))
}

func TestFindModesAndLookups(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dirB, "bridge"), nil, 0o755))
	paths := []string{dirA, dirB}
	for _, tc := range []struct {
		name   string
		mode   fakecni.FindMode
		plugin string
		want   string // "" for not found
	}{
		{"any: no look at the disk", fakecni.FindAny, "macvlan", filepath.Join(dirA, "macvlan")},
		{"any: no path in a name", fakecni.FindAny, "../bridge", ""},
		{"on disk: first dir with the file", fakecni.FindOnDisk, "bridge", filepath.Join(dirB, "bridge")},
		{"on disk: no file", fakecni.FindOnDisk, "macvlan", ""},
		{"on disk: no path in a name", fakecni.FindOnDisk, "../" + filepath.Base(dirB) + "/bridge", ""},
		{"unchecked: any name", fakecni.FindUnchecked, "../x", filepath.Join(dirA, "../x")},
		{"unchecked: still not empty", fakecni.FindUnchecked, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakecni.New()
			f.SetFindMode(tc.mode)
			got, err := f.FindInPath(tc.plugin, paths)
			if tc.want == "" {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}
			assert.Equal(t, 1, f.Lookups(tc.plugin), "found or not, the lookup is counted")
		})
	}

	f := fakecni.New()
	f.SetFindMode(fakecni.FindOnDisk)
	f.OnlyPlugins("macvlan")
	_, err := f.FindInPath("bridge", paths)
	require.Error(t, err, "OnlyPlugins applies on disk too")
	f.ResetCalls()
	assert.Zero(t, f.Lookups("bridge"))
}

func TestCallGetenv(t *testing.T) {
	c := fakecni.Call{Env: []string{"CNI_COMMAND=ADD", "CNI_ARGS=a=b;c=d", "CNI_COMMAND=DEL", "NOEQUALS"}}
	assert.Equal(t, "DEL", c.Getenv("CNI_COMMAND"), "the last value wins")
	assert.Equal(t, "a=b;c=d", c.Getenv("CNI_ARGS"))
	assert.Empty(t, c.Getenv("CNI_NETNS"))
}
