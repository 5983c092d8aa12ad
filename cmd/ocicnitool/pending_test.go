package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var statsNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return statsNow.Add(-d) }

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		since    time.Time
		want     time.Duration
		wantText string
	}{
		{name: "now", since: statsNow, want: 0, wantText: "0s"},
		{name: "rounded to the second", since: ago(3*time.Minute + 12*time.Second + 600*time.Millisecond), want: 3*time.Minute + 12*time.Second + 600*time.Millisecond, wantText: "3m13s"},
		{name: "hours", since: ago(5*time.Hour + 4*time.Second), want: 5*time.Hour + 4*time.Second, wantText: "5h0m4s"},
		{name: "days", since: ago(50*time.Hour + 5*time.Second), want: 50*time.Hour + 5*time.Second, wantText: "2d2h0m5s"},
		{name: "whole days", since: ago(72 * time.Hour), want: 72 * time.Hour, wantText: "3d"},
		{name: "days and seconds", since: ago(48*time.Hour + 4*time.Second), want: 48*time.Hour + 4*time.Second, wantText: "2d4s"},
		{name: "in the future (clock set back)", since: statsNow.Add(time.Minute), want: 0, wantText: "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := age(tc.since, statsNow)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantText, shortAge(got))
		})
	}
}

// TestPendingAges runs pending on testdata/pending, whose records hold
// three failed DELs, and checks each one's age:
//   - p1 net1/eth0, cached, retried since 2024-01-01, due since 00:05;
//   - p1 net2/net1, not cached, since 2025-06-01, next retry in 2999;
//   - p2 net2/eth0, not cached, given up, since 2023-01-01.
func TestPendingAges(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "pending"))
	before := time.Now()
	r := mustRun(t, exitOK, "pending", "--json", "--cache-dir", dir, "--conf-dir", t.TempDir(), "--bin-dir", t.TempDir())
	after := time.Now()
	pending := decode[[]pendingJSON](t, r)
	require.Len(t, pending, 3)
	var got []string
	for _, p := range pending {
		got = append(got, p.Container+"/"+p.Network+"/"+p.IfName)
		assert.GreaterOrEqual(t, p.AgeSeconds, before.Sub(p.Since).Seconds(), "%+v", p)
		assert.LessOrEqual(t, p.AgeSeconds, after.Sub(p.Since).Seconds(), "%+v", p)
	}
	assert.Equal(t, []string{"p1/net1/eth0", "p1/net2/net1", "p2/net2/eth0"}, got)
	assert.Contains(t, r.stdout, `"ageSeconds": `)
	r = mustRun(t, exitOK, "pending", "--cache-dir", dir, "--conf-dir", t.TempDir(), "--bin-dir", t.TempDir())
	assert.Regexp(t, `(?m)^CONTAINER +NETWORK +IFNAME +ATTEMPTS +SINCE +AGE +NEXT +LAST ERROR$`, r.stdout)
	assert.Regexp(t, `(?m)^p2 +net2 +eth0 +20 +2023-01-01T00:00:00Z +\d+d(?:\d+h)?(?:\d+m)?(?:\d+s)? +gave up +plugin failed \(delete\): gone for good$`, r.stdout)
}
