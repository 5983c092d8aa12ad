package testenv

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"syscall"
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

// CPUTime is the CPU time (user and system) this process has used, and
// that of its children that have been waited for: the plugins, once
// their runs returned.
type CPUTime struct{ Self, Children time.Duration }

// CPUNow returns the CPU time used so far. The benchmarks report the
// difference over a run per pod, which tells the manager's own CPU from
// its plugins' when the machine's cores are all busy.
func CPUNow(tb testing.TB) CPUTime {
	tb.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	sum := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return CPUTime{Self: sum(&self), Children: sum(&children)}
}

// Add returns the sum of t and o.
func (t CPUTime) Add(o CPUTime) CPUTime {
	return CPUTime{Self: t.Self + o.Self, Children: t.Children + o.Children}
}

// Sub returns the CPU time used between o and t.
func (t CPUTime) Sub(o CPUTime) CPUTime {
	return CPUTime{Self: t.Self - o.Self, Children: t.Children - o.Children}
}
