package netconf

import "time"

// debouncer decides when the watcher loads. The first event of a burst
// loads at once (the leading load), so that a new file is visible as soon
// as one load has read it. The events that follow within the debounce
// window are gathered into one trailing load, due one window after the
// latest of them but no later than maxDelay after the burst began. So a
// burst of writes costs two loads, and an event that comes while a load
// runs, or after it, is always followed by a load that sees its change.
//
// It holds no lock and reads no clock: the watcher goroutine owns it and
// passes the time in, which keeps it a pure state machine.
type debouncer struct {
	window   time.Duration // the debounce; 0 loads on every event
	maxDelay time.Duration // how long a stream of events may postpone a load

	first   time.Time // start of the current burst; zero when none is open
	pending bool      // a trailing load is due (the watcher's timer is armed)
	last    time.Time // end of the last load; zero before the first
}

// event records a relevant event at now. It reports whether the event
// opens a burst, and must be loaded at once; otherwise a trailing load is
// due after delay.
func (d *debouncer) event(now time.Time) (leading bool, delay time.Duration) {
	if !d.pending && !now.Before(d.last.Add(d.window)) {
		d.first = now
		return true, 0
	}
	return false, d.trail(now)
}

// trail makes a trailing load due, without an event (to confirm what a
// leading load left unconfirmed), and returns how long until it is.
func (d *debouncer) trail(now time.Time) time.Duration {
	if !d.pending {
		d.pending = true
		if d.first.IsZero() {
			d.first = now
		}
	}
	delay := d.window
	if rest := d.maxDelay - now.Sub(d.first); rest < delay {
		delay = max(rest, 0)
	}
	return delay
}

// fire records that the trailing load starts: the burst is over.
func (d *debouncer) fire() {
	d.pending = false
	d.first = time.Time{}
}

// loaded records that a load ended at now.
func (d *debouncer) loaded(now time.Time) { d.last = now }

// readyAt returns the earliest time at which an event loads at once (zero
// when any time will do), or ok false while a trailing load is due.
func (d *debouncer) readyAt() (at time.Time, ok bool) {
	switch {
	case d.pending:
		return time.Time{}, false
	case d.last.IsZero():
		return time.Time{}, true
	}
	return d.last.Add(d.window), true
}
