package netconf

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debounceStep is one call on a debouncer, at a time in milliseconds after
// the test's epoch, with what it must answer.
type debounceStep struct {
	op      string // "event", "trail", "fire", "loaded" or "ready"
	at      int
	leading bool // event: load at once
	delay   int  // event (when not leading) and trail: ms until the trailing load
	ready   int  // ready: ms from which an event leads; -1 while a trailing load is due
}

func TestDebouncer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		noDebounce bool // WithReloadDebounce(0); the window is 100ms otherwise
		steps      []debounceStep
	}{
		{
			name: "first event loads at once",
			steps: []debounceStep{
				{op: "ready", ready: 0},
				{op: "event", at: 0, leading: true},
			},
		},
		{
			name: "events after the leading load make a trailing load once they settle",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 2},
				{op: "ready", ready: 102},
				{op: "event", at: 5, delay: 3},
				{op: "ready", ready: -1},
				{op: "event", at: 6, delay: 3}, // each event re-arms it
				{op: "fire", at: 9},
				{op: "loaded", at: 11},
				{op: "ready", ready: 111},
			},
		},
		{
			name: "later events of the burst wait a window",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 1},
				{op: "event", at: 2, delay: 3},
				{op: "fire", at: 5},
				{op: "loaded", at: 6},
				{op: "event", at: 20, delay: 100},
				{op: "event", at: 50, delay: 100},
				{op: "fire", at: 150},
				{op: "loaded", at: 152},
				{op: "event", at: 252, leading: true}, // a new burst
				{op: "loaded", at: 253},
				{op: "event", at: 254, delay: 3}, // settles quickly again
			},
		},
		{
			name: "an event that comes during the leading load is followed by a trailing one",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 500}, // a slow load; the event below came meanwhile
				{op: "event", at: 500, delay: 3},
			},
		},
		{
			name: "after a quiet window the next event leads again",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 2},
				{op: "event", at: 102, leading: true},
			},
		},
		{
			name: "a due trailing load keeps later events from leading",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 2},
				{op: "event", at: 50, delay: 3},
				{op: "event", at: 300, delay: 3}, // the timer has not been served yet
			},
		},
		{
			name: "a stream of events is capped at maxDelay after it began",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 1},
				{op: "event", at: 50, delay: 3},
				{op: "event", at: 940, delay: 3},
				{op: "event", at: 999, delay: 1},
				{op: "event", at: 1100, delay: 0},
			},
		},
		{
			name: "a window-long wait is capped from the events after the last trailing load",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 1},
				{op: "event", at: 10, delay: 3},
				{op: "fire", at: 13},
				{op: "loaded", at: 15},
				{op: "event", at: 100, delay: 100},
				{op: "event", at: 1050, delay: 50}, // capped from 100, not from 0
			},
		},
		{
			name: "trail confirms a provisional load without an event",
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 3},
				{op: "trail", at: 3, delay: 3},
				{op: "ready", ready: -1},
				{op: "fire", at: 6},
				{op: "loaded", at: 7},
				{op: "ready", ready: 107},
				{op: "trail", at: 7, delay: 100}, // the second confirmation waits a window
			},
		},
		{
			name:       "a zero window loads on every event",
			noDebounce: true,
			steps: []debounceStep{
				{op: "event", at: 0, leading: true},
				{op: "loaded", at: 1},
				{op: "event", at: 1, leading: true},
				{op: "trail", at: 2, delay: 0},
			},
		},
	}
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return epoch.Add(time.Duration(n) * time.Millisecond) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := debouncer{window: 100 * time.Millisecond, settle: 3 * time.Millisecond, maxDelay: time.Second}
			if tt.noDebounce {
				d.window = 0
			}
			for i, s := range tt.steps {
				switch s.op {
				case "event":
					leading, delay := d.event(ms(s.at))
					assert.Equal(t, s.leading, leading, "step %d: leading", i)
					if !s.leading {
						assert.Equal(t, time.Duration(s.delay)*time.Millisecond, delay, "step %d: delay", i)
					}
				case "trail":
					assert.Equal(t, time.Duration(s.delay)*time.Millisecond, d.trail(ms(s.at)), "step %d: delay", i)
				case "fire":
					d.fire()
				case "loaded":
					d.loaded(ms(s.at))
				case "ready":
					at, ok := d.readyAt()
					switch {
					case s.ready < 0:
						assert.False(t, ok, "step %d: a trailing load is due", i)
					case d.last.IsZero():
						assert.True(t, ok, "step %d", i)
						assert.True(t, at.IsZero(), "step %d: ready at once", i)
					default:
						assert.True(t, ok, "step %d", i)
						assert.Equal(t, ms(s.ready), at, "step %d: ready at", i)
					}
				default:
					require.FailNow(t, "unknown op", s.op)
				}
			}
		})
	}
}
