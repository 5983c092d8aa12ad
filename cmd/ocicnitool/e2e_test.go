package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// node is a private CNI setup for one test: a conf dir holding the bridge
// network "cli" (bridge + host-local, the default network), a cache dir
// and host-local's data dir, all temporary.
type node struct {
	net                        testenv.Net
	confDir, cacheDir, ipamDir string
}

func newNode(t *testing.T) *node {
	t.Helper()
	testenv.RequireRoot(t)
	n := &node{net: testenv.Alloc(t), confDir: t.TempDir(), cacheDir: t.TempDir(), ipamDir: t.TempDir()}
	testenv.WriteFile(t, n.confDir, "10-cli.conflist", testenv.BridgeConflist("cli", "1.0.0", n.net, n.ipamDir))
	return n
}

// run runs the command cmd ("add", "cache ls", ...) against the node's
// directories and requires exit code want.
func (n *node) run(t *testing.T, want int, cmd string, args ...string) result {
	t.Helper()
	argv := append(strings.Fields(cmd), "--cache-dir", n.cacheDir)
	if cmd != "cache ls" {
		argv = append(argv, "--conf-dir", n.confDir, "--bin-dir", pluginDir)
	}
	return mustRun(t, want, append(argv, args...)...)
}

func (n *node) reservations(t *testing.T) []string {
	t.Helper()
	return testenv.Reservations(t, n.ipamDir, "cli")
}

// TestLifecycle walks one sandbox through add, status, check, cache ls and
// del with the real bridge and host-local plugins, and checks that nothing
// is left: no cache entry, no record, no reservation, no interface.
func TestLifecycle(t *testing.T) {
	n := newNode(t)
	nsPath := testenv.NewNS(t)
	ns := filepath.Base(nsPath) // named under /run/netns
	const id = "lifecycle-ctr"

	add := decode[podJSON](t, n.run(t, exitOK, "add", "--json", "--pod-name", "web-0", "--pod-namespace", "prod", ns, id))
	assert.Equal(t, podJSON{Container: id, NetNS: nsPath}, podJSON{Container: add.Container, NetNS: add.NetNS})
	require.Len(t, add.Attachments, 1)
	att := add.Attachments[0]
	assert.Equal(t, "cli", att.Network)
	assert.Equal(t, "eth0", att.IfName)
	assert.Equal(t, "eth0", att.Interface)
	assert.NotEmpty(t, att.MAC)
	require.Len(t, att.IPs, 1)
	ip, _, err := net.ParseCIDR(att.IPs[0])
	require.NoError(t, err)
	_, subnet, err := net.ParseCIDR(n.net.Subnet)
	require.NoError(t, err)
	assert.True(t, subnet.Contains(ip), "%s in %s", ip, n.net.Subnet)
	assert.Equal(t, []string{ip.String()}, n.reservations(t))
	assert.Equal(t, att.IPs, testenv.AddrsIn(t, nsPath, "eth0"))

	st := decode[nodeStatusJSON](t, n.run(t, exitOK, "status", "--json"))
	assert.Equal(t, "cli", st.Default)
	assert.True(t, st.Ready)
	assert.Equal(t, []networkStatusJSON{{Network: "cli", Default: true, Ready: true}}, st.Networks)
	assert.Empty(t, st.Skipped)

	ps := decode[podJSON](t, n.run(t, exitOK, "status", "--json", nsPath, id))
	require.Len(t, ps.Attachments, 1)
	assert.Equal(t, att.IPs, ps.Attachments[0].IPs)

	ck := decode[podJSON](t, n.run(t, exitOK, "check", "--json", nsPath, id))
	require.Len(t, ck.Attachments, 1)
	assert.Equal(t, "ok", ck.Attachments[0].Check)
	assert.Regexp(t, `(?m)^cli +eth0 +eth0 +\S+ +`+regexpQuote(att.IPs[0])+` +ok$`, n.run(t, exitOK, "check", ns, id).stdout)

	ls := decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json"))
	require.Len(t, ls.Entries, 1)
	assert.Equal(t, entryJSON{
		Network: "cli", Container: id, IfName: "eth0", NetNS: nsPath,
		File: filepath.Join(n.cacheDir, "results", "cli-"+id+"-eth0"), IPs: att.IPs,
	}, ls.Entries[0])
	require.Len(t, ls.Records, 1)
	assert.Equal(t, []recordedJSON{{Network: "cli", IfName: "eth0", NetNS: nsPath, Cached: true}}, ls.Records[0].Attachments)

	// A corrupt entry of the same sandbox is listed as such, and del
	// deletes it with the loaded config.
	corrupt := filepath.Join(n.cacheDir, "results", "cli-"+id+"-eth1")
	require.NoError(t, os.WriteFile(corrupt, []byte(`{"kind":"cniCacheV1","contai`), 0o600))
	ls = decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json", "--container", id))
	require.Len(t, ls.Entries, 2)
	assert.False(t, ls.Entries[0].Corrupt)
	assert.True(t, ls.Entries[1].Corrupt, "%+v", ls.Entries[1])
	assert.Equal(t, corrupt, ls.Entries[1].File)
	assert.Equal(t, "eth1", ls.Entries[1].IfName)

	del := decode[teardownJSON](t, n.run(t, exitOK, "del", "--json", ns, id))
	assert.Equal(t, teardownJSON{Container: id, Deleted: 2, Outcomes: []outcomeJSON{
		{Network: "cli", IfName: "eth1", Outcome: "deleted", Policy: "strict"},
		{Network: "cli", IfName: "eth0", Outcome: "deleted", Policy: "strict"},
	}}, del)

	ls = decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json"))
	assert.Empty(t, ls.Entries)
	assert.Empty(t, ls.Records)
	n.run(t, exitNotFound, "cache ls", "--container", id)
	assert.Empty(t, n.reservations(t))
	assert.Nil(t, testenv.AddrsIn(t, nsPath, "eth0"))

	// del is idempotent; the netns may be left out.
	n.run(t, exitOK, "del", id)
}

// TestDelPartialTeardown makes the DEL of one network fail (the recorder,
// as network "flaky") and checks the exit codes and outcomes of del, that
// the failed attachment stays cached for a retry, and that the retry
// succeeds once the fault is gone.
func TestDelPartialTeardown(t *testing.T) {
	n := newNode(t)
	fault := filepath.Join(t.TempDir(), "del-fails")
	testenv.WriteFile(t, n.confDir, "20-flaky.conf", testenv.RecorderConf("flaky", "1.0.0", filepath.Join(t.TempDir(), "calls.jsonl"),
		map[string]any{"del": map[string]any{"errorCode": 100, "errorMsg": "injected DEL failure", "onlyIfExists": fault}}))

	for _, tc := range []struct {
		name         string
		delArgs      []string
		wantCode     int
		wantOutcomes map[string]string // network -> outcome
	}{
		{
			name: "one of two fails", wantCode: exitPartial,
			wantOutcomes: map[string]string{"cli": "deleted", "flaky": "failed"},
		},
		{
			name: "the only one tried fails", delArgs: []string{"--network", "flaky:net1"}, wantCode: exitFailed,
			wantOutcomes: map[string]string{"flaky": "failed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testenv.NewNS(t)
			id := "partial-" + strings.ReplaceAll(tc.name, " ", "-")
			n.run(t, exitOK, "add", "--network", "cli,flaky:net1", ns, id)
			require.Len(t, n.reservations(t), 1)

			testenv.WriteFile(t, filepath.Dir(fault), filepath.Base(fault), "")
			r := n.run(t, tc.wantCode, "del", append([]string{"--json", ns, id}, tc.delArgs...)...)
			assert.Contains(t, r.stderr, `network "flaky" (ifname "net1") failed`)
			assert.Contains(t, r.stderr, "injected DEL failure")
			doc := decode[teardownJSON](t, r)
			got := map[string]string{}
			for _, o := range doc.Outcomes {
				got[o.Network] = o.Outcome
				if o.Network == "flaky" {
					assert.True(t, o.Failure)
					require.NotNil(t, o.Error)
					assert.Contains(t, o.Error.Message, "injected DEL failure")
					assert.Equal(t, uint(100), o.Error.CNICode)
				}
			}
			assert.Equal(t, tc.wantOutcomes, got)
			assert.Equal(t, 1, doc.Failed)

			// The failed attachment keeps its entry and record for a retry.
			ls := decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json", "--container", id, "--network", "flaky"))
			require.Len(t, ls.Entries, 1)
			assert.Equal(t, "net1", ls.Entries[0].IfName)
			require.Len(t, ls.Records, 1)
			// ...and shows as a pending teardown, for the runtime's manager
			// to retry in the background.
			pending := decode[[]pendingJSON](t, n.run(t, exitOK, "pending", "--json"))
			require.Len(t, pending, 1)
			assert.Equal(t, id, pending[0].Container)
			assert.Equal(t, "flaky", pending[0].Network)
			assert.Equal(t, 1, pending[0].Attempts)
			assert.NotNil(t, pending[0].NextAttempt)
			assert.Contains(t, pending[0].LastError, "injected DEL failure")
			assert.Contains(t, n.run(t, exitOK, "pending").stdout, "injected DEL failure")

			require.NoError(t, os.Remove(fault))
			n.run(t, exitOK, "del", ns, id)
			n.run(t, exitNotFound, "cache ls", "--container", id)
			assert.Empty(t, n.reservations(t))
			assert.Empty(t, decode[[]pendingJSON](t, n.run(t, exitOK, "pending", "--json")))
		})
	}
}

// TestCacheRmThenGC drops a sandbox's cache entries with cache rm and
// checks that gc, which does not list it as valid, still releases its
// address through the record, while a valid sandbox keeps its own.
func TestCacheRmThenGC(t *testing.T) {
	n := newNode(t)
	nsGone, nsValid := testenv.NewNS(t), testenv.NewNS(t)
	n.run(t, exitOK, "add", nsGone, "forgotten")
	n.run(t, exitOK, "add", nsValid, "valid")
	require.Len(t, n.reservations(t), 2)

	rm := decode[cacheRmJSON](t, n.run(t, exitOK, "cache rm", "--json", "--container", "forgotten"))
	assert.Equal(t, []string{filepath.Join(n.cacheDir, "results", "cli-forgotten-eth0")}, rm.Removed)
	assert.Equal(t, []recordedJSON{{Network: "cli", IfName: "eth0", NetNS: nsGone}}, rm.Record)
	assert.Len(t, n.reservations(t), 2, "cache rm runs no plugin")
	ls := decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json", "--container", "forgotten"))
	assert.Empty(t, ls.Entries)
	require.Len(t, ls.Records, 1)
	assert.Equal(t, []recordedJSON{{Network: "cli", IfName: "eth0", NetNS: nsGone, Cached: false}}, ls.Records[0].Attachments)

	gc := decode[gcJSON](t, n.run(t, exitOK, "gc", "--json", "--valid", "valid"))
	assert.Equal(t, gcJSON{
		Valid:     []string{"valid"},
		Outcomes:  []gcOutcomeJSON{{Container: "forgotten", Network: "cli", IfName: "eth0", Outcome: "deleted"}},
		Collected: 1,
		Errors:    []*errorJSON{},
	}, gc)
	assert.Len(t, n.reservations(t), 1)
	assert.Nil(t, testenv.AddrsIn(t, nsGone, "eth0"), "GC deleted inside the netns recorded at ADD")
	assert.Len(t, testenv.AddrsIn(t, nsValid, "eth0"), 1)

	ls = decode[cacheLsJSON](t, n.run(t, exitOK, "cache ls", "--json"))
	require.Len(t, ls.Entries, 1)
	assert.Equal(t, "valid", ls.Entries[0].Container)
	n.run(t, exitOK, "del", nsValid, "valid")
	assert.Empty(t, n.reservations(t))
}

// TestGCOutcomes runs gc over a stale sandbox, a stale sandbox whose DEL
// fails on network "flaky", and a valid sandbox, and checks what it
// prints: one outcome per stale attachment in the order the DELs ran,
// nothing of the valid sandbox, and exit code 3 for the failure. A second
// gc, once the fault is gone, collects the failed attachment.
func TestGCOutcomes(t *testing.T) {
	n := newNode(t)
	fault := filepath.Join(t.TempDir(), "del-fails")
	testenv.WriteFile(t, n.confDir, "20-flaky.conf", testenv.RecorderConf("flaky", "1.0.0", filepath.Join(t.TempDir(), "calls.jsonl"),
		map[string]any{"del": map[string]any{"errorCode": 100, "errorMsg": "injected DEL failure", "onlyIfExists": fault}}))
	nsStale, nsFlaky, nsValid := testenv.NewNS(t), testenv.NewNS(t), testenv.NewNS(t)
	n.run(t, exitOK, "add", nsStale, "gc-stale")
	n.run(t, exitOK, "add", "--network", "cli,flaky:net1", nsFlaky, "gc-flaky")
	n.run(t, exitOK, "add", nsValid, "gc-valid")
	require.Len(t, n.reservations(t), 3)
	testenv.WriteFile(t, filepath.Dir(fault), filepath.Base(fault), "")

	r := n.run(t, exitFailed, "gc", "--json", "--valid", "gc-valid")
	assert.Contains(t, r.stderr, "injected DEL failure")
	doc := decode[gcJSON](t, r)
	got := map[string][]string{} // container -> network/ifname=outcome, in DEL order
	for _, o := range doc.Outcomes {
		got[o.Container] = append(got[o.Container], o.Network+"/"+o.IfName+"="+o.Outcome)
		assert.Equal(t, o.Outcome == "failed", o.Failure, "%+v", o)
		if o.Failure {
			require.NotNil(t, o.Error)
			assert.Contains(t, o.Error.Message, "injected DEL failure")
			assert.Equal(t, uint(100), o.Error.CNICode)
		} else {
			assert.Nil(t, o.Error)
		}
	}
	assert.Equal(t, map[string][]string{
		"gc-stale": {"cli/eth0=deleted"},
		"gc-flaky": {"flaky/net1=failed", "cli/eth0=deleted"}, // reverse ADD order
	}, got)
	assert.Len(t, doc.Outcomes, 3)
	assert.Equal(t, 2, doc.Collected)
	assert.Equal(t, 1, doc.Left)
	require.Len(t, doc.Errors, 1)
	assert.Contains(t, doc.Errors[0].Message, `"flaky"`)
	assert.Equal(t, []string{"gc-valid"}, doc.Valid)
	assert.Len(t, n.reservations(t), 1, "only the valid sandbox keeps its address")

	// The table shows the same, and the failed attachment is still there
	// for the next gc.
	r = n.run(t, exitFailed, "gc", "--valid", "gc-valid")
	assert.Regexp(t, `(?m)^CONTAINER +NETWORK +IFNAME +OUTCOME +ERROR$`, r.stdout)
	assert.Regexp(t, `(?m)^gc-flaky +flaky +net1 +failed +.*injected DEL failure`, r.stdout)
	assert.NotContains(t, r.stdout, "gc-stale")
	assert.NotContains(t, r.stdout, "gc-valid")

	require.NoError(t, os.Remove(fault))
	doc = decode[gcJSON](t, n.run(t, exitOK, "gc", "--json", "--valid", "gc-valid"))
	assert.Equal(t, []gcOutcomeJSON{{Container: "gc-flaky", Network: "flaky", IfName: "net1", Outcome: "deleted"}}, doc.Outcomes)
	assert.Equal(t, 1, doc.Collected)
	assert.Zero(t, doc.Left)
	assert.Empty(t, doc.Errors)

	n.run(t, exitOK, "del", nsValid, "gc-valid")
	assert.Empty(t, n.reservations(t))
}

// TestNotFound checks exit code 2 for unknown networks, netns and
// containers.
func TestNotFound(t *testing.T) {
	n := newNode(t)
	ns := testenv.NewNS(t)
	// check and status want lo up in the netns, as setup leaves it.
	n.run(t, exitOK, "add", ns, "c0")
	missingNS := filepath.Join(t.TempDir(), "no-such-netns")
	for _, tc := range []struct {
		name       string
		cmd        string
		args       []string
		wantStderr string
	}{
		{name: "add to an unknown network", cmd: "add", args: []string{"--network", "nope", ns, "c1"}, wantStderr: `network "nope" not found in ` + n.confDir},
		{name: "check an unknown network", cmd: "check", args: []string{"--network", "nope", ns, "c1"}, wantStderr: `network "nope" not found`},
		{name: "status of an unknown network", cmd: "status", args: []string{"--network", "nope"}, wantStderr: "network nope not loaded"},
		{name: "check an unknown container", cmd: "check", args: []string{ns, "c1"}, wantStderr: "container c1 has no cache entry and no attachment record"},
		{name: "status of an unknown container", cmd: "status", args: []string{ns, "c1"}, wantStderr: "container c1 has no cache entry"},
		{name: "add in a missing netns", cmd: "add", args: []string{missingNS, "c1"}, wantStderr: "netns " + missingNS + " does not exist"},
		{name: "add in a missing named netns", cmd: "add", args: []string{"ocicnitool-no-such-ns", "c1"}, wantStderr: "/run/netns/ocicnitool-no-such-ns does not exist"},
		{name: "cache rm of an unknown container", cmd: "cache rm", args: []string{"--container", "c1"}, wantStderr: "container c1 has no cache entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.run(t, exitNotFound, tc.cmd, tc.args...)
			assert.Contains(t, r.stderr, tc.wantStderr)
		})
	}
	assert.Len(t, n.reservations(t), 1, "only c0 was attached")
	n.run(t, exitOK, "del", ns, "c0")
	assert.Empty(t, n.reservations(t))
}

// regexpQuote escapes the dots of an address for a regular expression.
func regexpQuote(s string) string { return strings.ReplaceAll(s, ".", `\.`) }
