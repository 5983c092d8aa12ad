package netconf

import "time"

// debouncer decides when the watcher loads. The first event of a burst
// loads at once (the leading load), so that a new file is visible as soon
// as one load has read it. The events that follow it are gathered into
// trailing loads. The first trailing load of a burst is due once the
// events have settled (no event for settle, a few milliseconds): one
// change often takes several events (a write after a truncation, a
// symlink swapped after a directory was made, a binary renamed into place
// after it was written), and the leading load may have seen only the
// first of them, so the change is visible within milliseconds too. Later
// trailing loads of the burst are due one window after the latest event.
// Either is due no later than maxDelay after its events began. So a burst
// of writes costs two or three loads, and an event that comes while a
// load runs, or after it, is always followed by a load that sees its
// change.
//
// It holds no lock and reads no clock: the watcher goroutine owns it and
// passes the time in, which keeps it a pure state machine.
type debouncer struct {
	window   time.Duration // the debounce; 0 loads on every event
	settle   time.Duration // quiet time before a burst's first trailing load
	maxDelay time.Duration // how long a stream of events may postpone a load

	first   time.Time // start of the pending events; zero when none are
	pending bool      // a trailing load is due (the watcher's timer is armed)
	settled bool      // the burst has had its first trailing load
	last    time.Time // end of the last load; zero before the first
}

// event records a relevant event at now. It reports whether the event
// opens a burst, and must be loaded at once; otherwise a trailing load is
// due after delay.
func (d *debouncer) event(now time.Time) (leading bool, delay time.Duration) {
	if !d.pending && !now.Before(d.last.Add(d.window)) {
		d.first, d.settled = now, false
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
	if !d.settled {
		delay = min(d.settle, d.window)
	}
	if rest := d.maxDelay - now.Sub(d.first); rest < delay {
		delay = max(rest, 0)
	}
	return delay
}

// fire records that a trailing load starts: the events so far are
// handled. The burst goes on until an event comes a window after the
// last load (and leads). It reports whether this is the burst's first
// trailing load, which, like the leading one, may still see a change half
// done; see [watcher.loadNow].
func (d *debouncer) fire() (first bool) {
	first = !d.settled
	d.pending = false
	d.settled = true
	d.first = time.Time{}
	return first
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
