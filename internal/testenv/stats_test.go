package testenv

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	assert.InDelta(t, 3.0, Quantile(xs, 0.5), 0)
	assert.InDelta(t, 5.0, Quantile(xs, 0.99), 0)
	assert.InDelta(t, 1.0, Quantile(xs, 0), 0)
	assert.Equal(t, []float64{5, 1, 4, 2, 3}, xs, "the input is not sorted in place")
	assert.Zero(t, Quantile(nil, 0.5))
	assert.InDelta(t, 1.5, Millis(1500*time.Microsecond), 0)
}

func TestRunWorkers(t *testing.T) {
	var runs atomic.Int64
	_, err := RunWorkers(3, 4, func(int, int) error { runs.Add(1); return nil })
	require.NoError(t, err)
	assert.Equal(t, int64(12), runs.Load())

	boom := errors.New("boom")
	runs.Store(0)
	_, err = RunWorkers(2, 5, func(w, i int) error {
		runs.Add(1)
		if w == 1 && i == 2 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, int64(8), runs.Load(), "worker 1 stops at its error, worker 0 runs all")
}
