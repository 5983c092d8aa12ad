package testenv

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BarrierTimeout bounds [Barrier.WaitEntered]: how long a plugin may take to
// start and reach the barrier on a loaded machine. It is shorter than the
// recorder's own 60 s bound on a held call.
const BarrierTimeout = 30 * time.Second

// Barrier holds a [Recorder] verb while the test acts. The plugin appends a
// line to EnteredFile once it is inside the verb, and then waits until
// ReleaseFile exists (see the recorder's "enteredFile" and "waitForFile"). A test waits
// with [Barrier.WaitEntered], does what must overlap with the call, and
// lets it finish with [Barrier.Release].
type Barrier struct {
	// EnteredFile gets one line per call that reached the barrier.
	EnteredFile string
	// ReleaseFile is the file whose creation lets the held calls go on.
	ReleaseFile string
}

// NewBarrier returns a barrier whose files live in a fresh temporary
// directory. It registers a cleanup that releases the barrier, so that a
// test that fails while a plugin is held does not leave it waiting.
func NewBarrier(tb testing.TB) *Barrier {
	tb.Helper()
	dir := tb.TempDir()
	b := &Barrier{EnteredFile: filepath.Join(dir, "entered"), ReleaseFile: filepath.Join(dir, "release")}
	tb.Cleanup(func() { b.Release(tb) })
	return b
}

// Behaviour returns the recorder behaviour keys that hold a verb at b,
// merged with extra (such as "errorCode"), for RecorderConf's "add",
// "del", ... keys.
func (b *Barrier) Behaviour(extra map[string]any) map[string]any {
	m := map[string]any{"enteredFile": b.EnteredFile, "waitForFile": b.ReleaseFile}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// Inside returns how many calls have reached the barrier so far, released
// or not.
func (b *Barrier) Inside(tb testing.TB) int {
	tb.Helper()
	data, err := os.ReadFile(b.EnteredFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return bytes.Count(data, []byte("\n"))
}

// WaitEntered waits until n calls have reached the barrier, polling, and
// fails the test after [BarrierTimeout].
func (b *Barrier) WaitEntered(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(BarrierTimeout)
	for {
		got := b.Inside(tb)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: %d of %d calls reached the barrier %s within %v", got, n, b.EnteredFile, BarrierTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Release lets every held call go on, and every later call pass the
// barrier without stopping. Releasing twice is fine.
func (b *Barrier) Release(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile(b.ReleaseFile, nil, 0o644); err != nil {
		tb.Errorf("testenv: release barrier: %v", err)
	}
}

// Rearm makes a released barrier hold again: later calls stop at it until
// the next Release, and Inside counts from zero. Call it only while no
// call is at the barrier or on its way to it.
func (b *Barrier) Rearm(tb testing.TB) {
	tb.Helper()
	for _, f := range []string{b.ReleaseFile, b.EnteredFile} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			tb.Fatalf("testenv: rearm barrier: %v", err)
		}
	}
}
