package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// TestStatsAndPendingAfterFailedDel attaches a sandbox to the bridge
// network and to "flaky" (the recorder, whose DEL fails while a fault file
// exists), makes its teardown fail on flaky, and checks what pending and
// stats report: the failed attachment's age, one pending teardown, the
// attachments left by network, the cache entry left; then, once a del
// succeeds, nothing pending and nothing left.
func TestStatsAndPendingAfterFailedDel(t *testing.T) {
	n := newNode(t)
	fault := filepath.Join(t.TempDir(), "del-fails")
	testenv.WriteFile(t, n.confDir, "20-flaky.conf", testenv.RecorderConf("flaky", "1.0.0", filepath.Join(t.TempDir(), "calls.jsonl"),
		map[string]any{"del": map[string]any{"errorCode": 100, "errorMsg": "injected DEL failure", "onlyIfExists": fault}}))
	ns := testenv.NewNS(t)
	const id = "stats-ctr"

	n.run(t, exitOK, "add", "--network", "cli,flaky:net1", ns, id)
	st := decode[statsJSON](t, n.run(t, exitOK, "stats", "--json"))
	assert.Equal(t, sandboxStatsJSON{Total: 1, Recorded: 1, Cached: 1}, st.Sandboxes)
	assert.Equal(t, 2, st.Attachments)
	assert.Equal(t, []networkStatsJSON{
		{Network: "cli", Attachments: 1, Cached: 1},
		{Network: "flaky", Attachments: 1, Cached: 1},
	}, st.Networks)
	assert.Equal(t, entryStatsJSON{Total: 2}, st.Entries)
	assert.Equal(t, pendingStatsJSON{}, st.Pending)
	// The node's dirs make it load the conf dir too (--conf is implied).
	require.NotNil(t, st.Config)
	assert.Equal(t, n.confDir, st.Config.ConfDir)
	assert.Equal(t, "cli", st.Config.Default)
	assert.Equal(t, []string{"cli", "flaky"}, st.Config.Networks)
	assert.Empty(t, st.Config.Skipped)

	testenv.WriteFile(t, filepath.Dir(fault), filepath.Base(fault), "")
	failedAt := time.Now()
	n.run(t, exitPartial, "del", ns, id)

	pending := decode[[]pendingJSON](t, n.run(t, exitOK, "pending", "--json"))
	require.Len(t, pending, 1)
	p := pending[0]
	assert.Equal(t, id, p.Container)
	assert.Equal(t, "flaky", p.Network)
	assert.Equal(t, 1, p.Attempts)
	assert.WithinRange(t, p.Since, failedAt, time.Now())
	assert.GreaterOrEqual(t, p.AgeSeconds, 0.0)
	assert.LessOrEqual(t, p.AgeSeconds, time.Since(failedAt).Seconds(), "the age counts from the failed DEL")
	require.NotNil(t, p.NextAttempt)

	st = decode[statsJSON](t, n.run(t, exitOK, "stats", "--json"))
	assert.Equal(t, sandboxStatsJSON{Total: 1, Recorded: 1, Cached: 1}, st.Sandboxes)
	assert.Equal(t, 1, st.Attachments)
	assert.Equal(t, []networkStatsJSON{{Network: "flaky", Attachments: 1, Cached: 1, Pending: 1}}, st.Networks,
		"cli's DEL succeeded; flaky's is pending")
	assert.Equal(t, entryStatsJSON{Total: 1}, st.Entries)
	wantDue := 0
	if !p.NextAttempt.After(st.At) {
		wantDue = 1 // the tool's manager does not retry; the runtime's would now
	}
	assert.Equal(t, pendingStatsJSON{
		Total: 1, DueNow: wantDue,
		OldestSince: &p.Since, OldestAgeSeconds: st.At.Sub(p.Since).Seconds(), NextAttempt: p.NextAttempt,
	}, st.Pending)
	assert.GreaterOrEqual(t, st.Pending.OldestAgeSeconds, p.AgeSeconds, "stats ran after pending")

	// The cache dir alone gives the same figures, without the conf dir.
	alone := decode[statsJSON](t, mustRun(t, exitOK, "stats", "--json", "--cache-dir", n.cacheDir))
	assert.Nil(t, alone.Config)
	assert.Equal(t, st.Networks, alone.Networks)
	assert.Equal(t, st.Pending.Total, alone.Pending.Total)

	table := n.run(t, exitOK, "stats").stdout
	assert.Regexp(t, `(?m)^PENDING TEARDOWNS\nTOTAL +GAVE UP +DUE NOW +OLDEST +NEXT\n1 +0 +[01] +\d+s +\S+$`, table)
	assert.Regexp(t, `(?m)^flaky +1 +1 +1$`, table)
	assert.Regexp(t, `(?m)^`+id+` +flaky +net1 +1 +\S+ +\d+s +\S+ +.*injected DEL failure$`, n.run(t, exitOK, "pending").stdout)

	require.NoError(t, os.Remove(fault))
	n.run(t, exitOK, "del", ns, id)
	assert.Empty(t, decode[[]pendingJSON](t, n.run(t, exitOK, "pending", "--json")))
	st = decode[statsJSON](t, n.run(t, exitOK, "stats", "--json"))
	assert.Equal(t, sandboxStatsJSON{}, st.Sandboxes)
	assert.Zero(t, st.Attachments)
	assert.Empty(t, st.Networks)
	assert.Equal(t, entryStatsJSON{}, st.Entries)
	assert.Equal(t, pendingStatsJSON{}, st.Pending)
	assert.Empty(t, n.reservations(t))
}
