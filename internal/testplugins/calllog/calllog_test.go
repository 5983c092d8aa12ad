package calllog_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

func TestReadMissingFileIsEmpty(t *testing.T) {
	calls, err := calllog.Read(filepath.Join(t.TempDir(), "none.jsonl"))
	require.NoError(t, err)
	assert.Empty(t, calls)
}

func TestAppendReadFilter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	now := time.Now().UTC()
	for _, verb := range []string{"ADD", "DEL", "ADD"} {
		require.NoError(t, calllog.Append(path, calllog.Call{
			Verb:  verb,
			Stdin: map[string]any{"runtimeConfig": map[string]any{"k": "v"}},
			Time:  now,
		}))
	}
	calls, err := calllog.Read(path)
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.True(t, now.Equal(calls[0].Time))
	assert.Equal(t, map[string]any{"k": "v"}, calls[0].RuntimeConfig())
	assert.Nil(t, calls[0].PrevResult())
	assert.Len(t, calllog.Filter(calls, "ADD"), 2)
	assert.Empty(t, calllog.Filter(calls, "GC"))
}

func TestReadRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{\"verb\":\"ADD\"}\nnot json\n"), 0o644))
	_, err := calllog.Read(path)
	require.Error(t, err)
}

// Spans pairs each start with the first end after it of the same
// process and call; Overlaps finds the calls on one container that ran
// at once, a call without an end overlapping every later one.
func TestSpansAndOverlaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(pid int, verb, id string, ms int) calllog.Call {
		return calllog.Call{PID: pid, Verb: verb, ContainerID: id, IfName: "eth0", Time: at(ms)}
	}
	for _, tc := range []struct {
		name         string
		starts, ends []calllog.Call
		wantOverlaps [][2]int // indexes into starts
	}{
		{
			name:   "one after the other",
			starts: []calllog.Call{call(1, "ADD", "a", 0), call(2, "DEL", "a", 10)},
			ends:   []calllog.Call{call(1, "ADD", "a", 10), call(2, "DEL", "a", 20)},
		},
		{
			name:         "a DEL that starts while the ADD runs",
			starts:       []calllog.Call{call(1, "ADD", "a", 0), call(2, "DEL", "a", 5)},
			ends:         []calllog.Call{call(1, "ADD", "a", 10), call(2, "DEL", "a", 20)},
			wantOverlaps: [][2]int{{0, 1}},
		},
		{
			name:   "other containers do not overlap",
			starts: []calllog.Call{call(1, "DEL", "a", 0), call(2, "DEL", "b", 5)},
			ends:   []calllog.Call{call(1, "DEL", "a", 10), call(2, "DEL", "b", 20)},
		},
		{
			name:         "a call without an end overlaps every later one",
			starts:       []calllog.Call{call(1, "DEL", "a", 0), call(2, "DEL", "a", 500)},
			ends:         []calllog.Call{call(2, "DEL", "a", 600)},
			wantOverlaps: [][2]int{{0, 1}},
		},
		{
			name:   "a reused PID gets the end after its own start",
			starts: []calllog.Call{call(1, "DEL", "a", 0), call(1, "DEL", "a", 20)},
			ends:   []calllog.Call{call(1, "DEL", "a", 30), call(1, "DEL", "a", 10)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := calllog.Spans(tc.starts, tc.ends)
			require.Len(t, spans, len(tc.starts))
			var got [][2]int
			idx := func(s calllog.Span) int {
				for i, c := range tc.starts {
					if c.PID == s.PID && c.Time.Equal(s.Time) && c.ContainerID == s.ContainerID {
						return i
					}
				}
				return -1
			}
			for _, p := range calllog.Overlaps(spans) {
				got = append(got, [2]int{idx(p[0]), idx(p[1])})
			}
			assert.ElementsMatch(t, tc.wantOverlaps, got)
		})
	}
}
