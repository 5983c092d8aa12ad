package ocicni

import (
	"fmt"
	"runtime"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/admit"
)

// Admission bounds how many pod operations run their plugins at once. A
// zero field takes its default; see [WithAdmission].
//
// Setups run their plugins in arrival order, at most [Admission].Setup at
// once (two per CPU by default); the others wait with their sandbox's
// lock (see the package doc, "Locking"). Plugin start-up is CPU-bound, so
// with every ADD of a burst at once each pod waits for all of them;
// admitted in turn, most pods are ready sooner and the last no later. Teardowns have their own queue, eight per
// CPU by default: a DEL mostly waits. A call whose context ends in the queue
// returns an error matching [ErrNotAdmitted] and the context's error, having
// run and changed nothing. An operation counts against its bound for at most
// [Admission].Overtime (a second), so a hung plugin holds the queue up no
// longer. Status, CHECK, a repeated setup that finds every attachment live,
// GC and healing's retries never queue. A rollback runs under its setup's
// admission; left in the background by its caller's deadline, it gives it
// up. [WithAdmission] sets the bounds; [WithoutAdmission] admits every
// operation at once, as libcni's callers do.
type Admission struct {
	// Setup is how many setups may run their plugins at once; the others
	// wait in arrival order. By default, two per CPU the process may use
	// (GOMAXPROCS). [Unbounded] admits every setup at once.
	Setup int
	// Teardown is the same for teardowns; eight per CPU by default. DEL
	// mostly waits (on the kernel, on IPAM locks) where ADD computes, so
	// a bound as tight as setup's would stretch a burst of teardowns.
	Teardown int
	// Overtime is how long an operation counts against its bound: past
	// it, its slot goes to the next waiter and its plugins run on
	// uncounted, so that a plugin that hangs, or waits on a remote API,
	// holds up the node for at most that long. One second by default.
	Overtime time.Duration
	// Disabled admits every operation at once, as libcni's callers do
	// (see [WithoutAdmission]).
	Disabled bool
}

// Unbounded, as [Admission.Setup] or [Admission.Teardown], admits every
// operation of that kind at once.
const Unbounded = -1

// defaultAdmission derives the bounds from the CPUs the process may use:
// plugin runs are Go binaries starting up, so CPU-bound. BENCHMARKS.md
// has the bounds measured against each other (BenchmarkBurstBounds).
func defaultAdmission() Admission {
	cpus := runtime.GOMAXPROCS(0)
	return Admission{Setup: 2 * cpus, Teardown: 8 * cpus, Overtime: time.Second}
}

// WithAdmission sets the bounds of [Admission]; a zero field keeps its
// default. A negative bound other than [Unbounded], or a negative
// overtime, is refused.
func WithAdmission(a Admission) Option {
	return func(o *options) error {
		for _, n := range []int{a.Setup, a.Teardown} {
			if n < Unbounded {
				return fmt.Errorf("%w: admission bound %d, want at least 1, or Unbounded", ErrInvalidArgument, n)
			}
		}
		if a.Overtime < 0 {
			return fmt.Errorf("%w: admission overtime %v", ErrInvalidArgument, a.Overtime)
		}
		d := defaultAdmission()
		if a.Setup == 0 {
			a.Setup = d.Setup
		}
		if a.Teardown == 0 {
			a.Teardown = d.Teardown
		}
		if a.Overtime == 0 {
			a.Overtime = d.Overtime
		}
		o.admission = a
		return nil
	}
}

// WithoutAdmission admits every pod operation at once: each setup and
// teardown runs its plugins as soon as it holds its sandbox's lock, as
// with libcni alone.
func WithoutAdmission() Option {
	return func(o *options) error {
		o.admission.Disabled = true
		return nil
	}
}

// admissionQueues are the manager's two queues; nil ones admit at once.
type admissionQueues struct {
	setup, teardown *admit.Queue
}

func newAdmissionQueues(a Admission) admissionQueues {
	if a.Disabled {
		return admissionQueues{}
	}
	return admissionQueues{setup: admit.New(a.Setup, a.Overtime), teardown: admit.New(a.Teardown, a.Overtime)}
}
