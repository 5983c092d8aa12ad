package bgwork_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/seed-671fdd43/ocicni/internal/bgwork"
)

func TestWaitWithoutWorkReturns(t *testing.T) {
	var tr bgwork.Tracker
	tr.Wait()
	tr.Add()
	tr.Done()
	tr.Wait()
	tr.Wait() // twice is fine
}

// Wait returns only after every Done, including the Done of work that
// started while it waited: each piece of work counts itself as ended
// before its Done, so Wait sees every count.
func TestWaitWaitsForWorkStartedMeanwhile(t *testing.T) {
	const chains = 8
	var tr bgwork.Tracker
	var ended atomic.Int32
	var work func(depth int)
	work = func(depth int) {
		if depth > 0 {
			tr.Add() // Add before go, from the work that starts it
			go work(depth - 1)
		}
		ended.Add(1)
		tr.Done()
	}
	for range chains {
		tr.Add()
		go work(3)
	}
	tr.Wait()
	assert.Equal(t, int32(chains*4), ended.Load())
}

func TestDoneWithoutAddPanics(t *testing.T) {
	var tr bgwork.Tracker
	assert.PanicsWithValue(t, "bgwork: Done without Add", tr.Done)
	tr.Add()
	tr.Done()
	assert.Panics(t, tr.Done, "one Done per Add")
}
