package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// pluginPath is the recorder binary built by TestMain.
var pluginPath string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithBinary("recorder", false, &pluginPath, m.Run))
}

// conf returns a recorder netconf logging to logFile, with extra keys.
func conf(t *testing.T, cniVersion, logFile string, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{"cniVersion": cniVersion, "name": "net", "type": "recorder", "logFile": logFile}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// args returns invoke arguments for verb with a fake netns path.
func args(verb string) *invoke.Args {
	return &invoke.Args{
		Command:       verb,
		ContainerID:   "ctr1",
		NetNS:         "/var/run/netns/does-not-exist",
		IfName:        "eth0",
		Path:          "/opt/cni/bin",
		PluginArgsStr: "K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns",
	}
}

func TestAddEmptyResult(t *testing.T) {
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			c := conf(t, v, "", map[string]any{"add": map[string]any{"emptyResult": true}})
			res, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
			require.NoError(t, err)
			assert.Equal(t, v, res.Version())
			cur, err := current.NewResultFromResult(res)
			require.NoError(t, err)
			assert.Empty(t, cur.Interfaces)
			assert.Empty(t, cur.IPs)
		})
	}
}

func TestAddRawResult(t *testing.T) {
	raw := json.RawMessage(`{"cniVersion":"0.2.0","ip4":{"ip":"10.1.2.3/24","gateway":"10.1.2.1"}}`)
	c := conf(t, "0.2.0", "", map[string]any{"add": map[string]any{"result": raw}})
	res, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
	require.NoError(t, err)
	r020, ok := res.(*types020.Result)
	require.True(t, ok, "result type %T", res)
	require.NotNil(t, r020.IP4)
	assert.Equal(t, "10.1.2.3/24", r020.IP4.IP.String())
}

func TestAddGarbageResult(t *testing.T) {
	c := conf(t, "1.0.0", "", map[string]any{"add": map[string]any{"result": "not json"}})
	_, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
	require.Error(t, err, "the plugin succeeded but printed an unparsable result")
}

func TestAddPassesPrevResultThrough(t *testing.T) {
	prev := map[string]any{
		"cniVersion": "1.0.0",
		"interfaces": []any{map[string]any{"name": "eth0", "sandbox": "/x"}},
		"ips":        []any{map[string]any{"address": "10.9.9.9/24", "interface": 0}},
	}
	c := conf(t, "0.4.0", "", map[string]any{"prevResult": prev})
	res, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
	require.NoError(t, err)
	assert.Equal(t, "0.4.0", res.Version())
	cur, err := current.NewResultFromResult(res)
	require.NoError(t, err)
	require.Len(t, cur.IPs, 1)
	assert.Equal(t, "10.9.9.9/24", cur.IPs[0].Address.String())
	require.Len(t, cur.Interfaces, 1)
	assert.Equal(t, "eth0", cur.Interfaces[0].Name)
}

func TestErrorCode(t *testing.T) {
	for _, verb := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
		t.Run(verb, func(t *testing.T) {
			key := map[string]string{"ADD": "add", "DEL": "del", "CHECK": "check", "GC": "gc", "STATUS": "status"}[verb]
			c := conf(t, "1.1.0", "", map[string]any{key: map[string]any{"errorCode": 11, "errorMsg": "try later"}})
			err := invoke.ExecPluginWithoutResult(context.Background(), pluginPath, c, args(verb), nil)
			var cniErr *types.Error
			require.ErrorAs(t, err, &cniErr)
			assert.Equal(t, uint(11), cniErr.Code)
			assert.Equal(t, "try later", cniErr.Msg)
		})
	}
}

func TestOnlyIfExists(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "fault")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	c := conf(t, "1.0.0", "", map[string]any{"del": map[string]any{"errorCode": 7, "onlyIfExists": flag}})

	err := invoke.ExecPluginWithoutResult(context.Background(), pluginPath, c, args("DEL"), nil)
	var cniErr *types.Error
	require.ErrorAs(t, err, &cniErr)
	assert.Equal(t, uint(7), cniErr.Code)

	require.NoError(t, os.Remove(flag))
	require.NoError(t, invoke.ExecPluginWithoutResult(context.Background(), pluginPath, c, args("DEL"), nil))
}

func TestCrash(t *testing.T) {
	c := conf(t, "1.0.0", "", map[string]any{"add": map[string]any{"crash": true, "errorCode": 7}})
	_, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
	require.Error(t, err)
	var cniErr *types.Error
	require.ErrorAs(t, err, &cniErr)
	// invoke could not parse the garbage, so there is no plugin error code.
	assert.Equal(t, uint(0), cniErr.Code)
}

func TestCallLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")
	ctx := context.Background()
	add := conf(t, "1.1.0", logFile, map[string]any{
		"runtimeConfig": map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080}}},
	})
	_, err := invoke.ExecPluginWithResult(ctx, pluginPath, add, args("ADD"), nil)
	require.NoError(t, err)
	failing := conf(t, "1.1.0", logFile, map[string]any{"del": map[string]any{"errorCode": 3}})
	require.Error(t, invoke.ExecPluginWithoutResult(ctx, pluginPath, failing, args("DEL"), nil))
	gc := conf(t, "1.1.0", logFile, map[string]any{
		"cni.dev/valid-attachments": []any{map[string]any{"containerID": "ctr1", "ifname": "eth0"}},
	})
	require.NoError(t, invoke.ExecPluginWithoutResult(ctx, pluginPath, gc, &invoke.Args{Command: "GC", Path: "/opt/cni/bin"}, nil))

	calls, err := calllog.Read(logFile)
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.Equal(t, []string{"ADD", "DEL", "GC"}, []string{calls[0].Verb, calls[1].Verb, calls[2].Verb})

	a := calls[0]
	assert.Equal(t, "ctr1", a.ContainerID)
	assert.Equal(t, "eth0", a.IfName)
	assert.Equal(t, "/var/run/netns/does-not-exist", a.NetNS)
	assert.Equal(t, "net", a.Network)
	assert.Equal(t, "K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns", a.Args)
	assert.Equal(t, "/opt/cni/bin", a.Path)
	assert.NotZero(t, a.PID)
	assert.False(t, a.Time.IsZero())
	assert.Contains(t, a.RuntimeConfig(), "portMappings")

	assert.Len(t, calllog.Filter(calls, "DEL"), 1)
	assert.Contains(t, calls[2].Stdin, "cni.dev/valid-attachments")
}

func TestSleep(t *testing.T) {
	c := conf(t, "1.0.0", "", map[string]any{"del": map[string]any{"sleepMs": 200}})
	start := time.Now()
	require.NoError(t, invoke.ExecPluginWithoutResult(context.Background(), pluginPath, c, args("DEL"), nil))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)

	// A cancelled context kills a sleeping plugin.
	c = conf(t, "1.0.0", "", map[string]any{"del": map[string]any{"sleepMs": 60_000}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.Error(t, invoke.ExecPluginWithoutResult(ctx, pluginPath, c, args("DEL"), nil))
	assert.Less(t, time.Since(start), 30*time.Second)
}

// execAsync runs verb in the background and returns its error channel.
func execAsync(ctx context.Context, c []byte, verb string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- invoke.ExecPluginWithoutResult(ctx, pluginPath, c, args(verb), nil) }()
	return done
}

// waitLines waits until path holds n whole lines and returns them. The
// plugin creates the file before it writes its line, so an empty file, or
// a line without its newline yet, is not counted.
func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	var lines []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(path)
		if !assert.NoError(c, err) {
			return
		}
		whole := string(b[:bytes.LastIndexByte(b, '\n')+1])
		lines = nil
		if whole != "" {
			lines = strings.Split(strings.TrimSuffix(whole, "\n"), "\n")
		}
		assert.Len(c, lines, n)
	}, 30*time.Second, 5*time.Millisecond)
	return lines
}

func TestBarrierHoldsUntilReleased(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "calls.jsonl")
	entered, release := filepath.Join(dir, "entered"), filepath.Join(dir, "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) }) // never leave a plugin waiting
	c := conf(t, "1.0.0", logFile, map[string]any{
		// The error applies only once the release file exists: a plugin
		// that did not wait for it would succeed.
		"del": map[string]any{"enteredFile": entered, "waitForFile": release, "errorCode": 11, "onlyIfExists": release},
	})

	done := execAsync(context.Background(), c, "DEL")
	assert.Equal(t, []string{"DEL ctr1 eth0"}, waitLines(t, entered, 1))
	calls, err := calllog.Read(logFile)
	require.NoError(t, err)
	assert.Len(t, calls, 1, "the call is logged before the plugin enters")
	select {
	case err := <-done:
		require.FailNow(t, "the plugin returned before waitForFile existed", "err=%v", err)
	default:
	}

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	select {
	case err := <-done:
		var cniErr *types.Error
		require.ErrorAs(t, err, &cniErr)
		assert.Equal(t, uint(11), cniErr.Code, "the rest of the behaviour runs after the release")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the plugin did not return after waitForFile was created")
	}
}

func TestBarrierCountsConcurrentCalls(t *testing.T) {
	dir := t.TempDir()
	entered, release := filepath.Join(dir, "entered"), filepath.Join(dir, "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o644) })
	c := conf(t, "1.0.0", "", map[string]any{"check": map[string]any{"enteredFile": entered, "waitForFile": release}})

	first, second := execAsync(context.Background(), c, "CHECK"), execAsync(context.Background(), c, "CHECK")
	assert.Equal(t, []string{"CHECK ctr1 eth0", "CHECK ctr1 eth0"}, waitLines(t, entered, 2),
		"both calls are inside at once, one line each")
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	for _, done := range []<-chan error{first, second} {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			require.FailNow(t, "a plugin did not return after waitForFile was created")
		}
	}
}

func TestBarrierAlreadyReleased(t *testing.T) {
	dir := t.TempDir()
	entered, release := filepath.Join(dir, "entered"), filepath.Join(dir, "release")
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	c := conf(t, "1.0.0", "", map[string]any{"add": map[string]any{"enteredFile": entered, "waitForFile": release}})
	_, err := invoke.ExecPluginWithResult(context.Background(), pluginPath, c, args("ADD"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"ADD ctr1 eth0"}, waitLines(t, entered, 1))
}

func TestBarrierWaitIsBounded(t *testing.T) {
	release := filepath.Join(t.TempDir(), "never")
	c := conf(t, "1.1.0", "", map[string]any{"gc": map[string]any{"waitForFile": release, "waitMaxMs": 100}})
	start := time.Now()
	err := invoke.ExecPluginWithoutResult(context.Background(), pluginPath, c, &invoke.Args{Command: "GC", Path: "/opt/cni/bin"}, nil)
	var cniErr *types.Error
	require.ErrorAs(t, err, &cniErr)
	assert.Equal(t, uint(types.ErrInternal), cniErr.Code)
	assert.Contains(t, cniErr.Details, release)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "it waited before giving up")
	assert.Less(t, time.Since(start), 30*time.Second, "waitMaxMs bounds the wait")

	// A cancelled context kills a held plugin long before the bound.
	c = conf(t, "1.1.0", "", map[string]any{"gc": map[string]any{"waitForFile": release}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	require.Error(t, invoke.ExecPluginWithoutResult(ctx, pluginPath, c, &invoke.Args{Command: "GC", Path: "/opt/cni/bin"}, nil))
	assert.Less(t, time.Since(start), 30*time.Second)
}

// With endLogFile, each call logs its end too, failed or not, and
// calllog.Spans pairs it with its start.
func TestEndLog(t *testing.T) {
	dir := t.TempDir()
	logFile, endFile := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "ends.jsonl")
	ctx := context.Background()
	c := conf(t, "1.1.0", logFile, map[string]any{
		"endLogFile": endFile, "del": map[string]any{"sleepMs": 50, "errorCode": 11},
	})
	_, err := invoke.ExecPluginWithResult(ctx, pluginPath, c, args("ADD"), nil)
	require.NoError(t, err)
	require.Error(t, invoke.ExecPluginWithoutResult(ctx, pluginPath, c, args("DEL"), nil))

	starts, err := calllog.Read(logFile)
	require.NoError(t, err)
	ends, err := calllog.Read(endFile)
	require.NoError(t, err)
	require.Len(t, ends, 2, "one end per call, the failed DEL's included")
	spans := calllog.Spans(starts, ends)
	require.Len(t, spans, 2)
	for _, s := range spans {
		assert.False(t, s.End.IsZero(), "%s has an end", s.Verb)
		assert.False(t, s.End.Before(s.Time), "%s ends after it starts", s.Verb)
	}
	assert.GreaterOrEqual(t, spans[1].End.Sub(spans[1].Time), 50*time.Millisecond, "the DEL's span covers its sleep")
	assert.Empty(t, calllog.Overlaps(spans), "one call after the other")
}
