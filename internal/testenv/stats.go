package testenv

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// Quantile returns the q-quantile of xs (nearest rank), sorting a copy;
// 0 for no xs. The benchmarks report medians and tails with it.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)]
}

// Millis returns d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RunWorkers runs fn(w, i) for i in [0, perWorker) on each of workers
// goroutines, and returns how long the whole took and the errors of the
// workers that failed (a worker stops at its first error), joined.
func RunWorkers(workers, perWorker int, fn func(w, i int) error) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if err := fn(w, i); err != nil {
					errs[w] = fmt.Errorf("worker %d, run %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// Within runs f in a goroutine and fails the test if f has not returned
// after d; what names f in the failure.
func Within(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("testenv: %s did not return within %v", what, d)
	}
}
