package ocicni

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// defaultGatePatience lets pods in for a second before GC holds them
// back, for at most a fifth of a second at a time (see locks.Gate).
var defaultGatePatience = locks.Patience{Idle: time.Second, Hold: 200 * time.Millisecond}

// lockHow is how a pod operation takes its sandbox's lock file.
type lockHow int

const (
	// lockMust waits for the lock file, and fails when it cannot be had:
	// a setup, which records what a teardown needs, refuses to run
	// unlocked.
	lockMust lockHow = iota
	// lockBest waits for the lock file and, when it cannot be had for a
	// file system reason (see [locks.ErrUnavailable]), goes on under the
	// in-process locks alone: a teardown, a status, a DEL retry. A
	// sick file system never keeps a DEL from running.
	lockBest
	// lockTry does not wait: a GC DEL gets [locks.ErrBusy] when another
	// holder has the file, and leaves a sandbox whose file it cannot
	// have for GC's next run.
	lockTry
)

// lease takes, in the documented order, the shared gate, the node gate
// shared (so that another engine's GC verbs wait for it), the pod's lock
// and the sandbox's lock file (so that no engine or process on the node
// runs an operation on the sandbox meanwhile), and returns ctx bound to
// the lock file (see [sandboxStore.lockSandbox]). A node gate whose files
// cannot be used is skipped, for every operation; the sandbox's lock file
// as how says.
func (e *engine) lease(ctx context.Context, id string, how lockHow) (context.Context, *podLocks, error) {
	if err := e.gate.RLock(ctx); err != nil {
		return ctx, nil, fmt.Errorf("ocicni: waiting for GC: %w", err)
	}
	node, err := e.store.led.RLockNode(ctx)
	switch {
	case errors.Is(err, locks.ErrUnavailable):
		e.store.fault.failed(err)
	case err != nil:
		e.gate.RUnlock()
		return ctx, nil, fmt.Errorf("ocicni: waiting for another engine's GC: %w", err)
	}
	ctx, sb, err := e.store.lockSandbox(ctx, e.pods, id, how)
	if err != nil {
		if node != nil {
			node.Unlock(false)
		}
		e.gate.RUnlock()
		return ctx, nil, err
	}
	return ctx, &podLocks{gate: e.gate, node: node, sandbox: sb}, nil
}

// podLocks is the shared gates and one pod's locks, held together. A
// background rollback drops the gates early and keeps the pod's locks.
type podLocks struct {
	gate     *locks.Gate
	node     *locks.FileLock // nil: the node gate's files could not be used
	gateOnce sync.Once
	sandbox  *sandboxLock
}

// dropGate releases the gates, once.
func (l *podLocks) dropGate() {
	l.gateOnce.Do(func() {
		if l.node != nil {
			l.node.Unlock(false)
		}
		l.gate.RUnlock()
	})
}

// release releases the pod's locks, then the gates if they are still
// held.
func (l *podLocks) release() {
	l.sandbox.release()
	l.dropGate()
}

// sandboxLock is one sandbox's locks, held: its lock in the manager's
// keyed locks and its lock file.
type sandboxLock struct {
	file   *ledger.SandboxLock // nil: the lock file could not be had (see lockBest)
	unlock func()              // the keyed lock's
}

// lockSandbox takes sandbox id's lock in pods, then its lock file, which
// holds across engines and processes, as how says (see [lockHow]).
//
// The context it returns marks the plugins run under it to inherit the
// lock file (see [pluginexec.WithInherited]): a plugin that outlives this
// process, killed in the middle of an operation, keeps the sandbox
// locked until it exits, so that no other engine runs a plugin on the
// sandbox beside it. The plugins must have ended when the lock is
// released.
func (st *sandboxStore) lockSandbox(ctx context.Context, pods *locks.Keyed, id string, how lockHow) (context.Context, *sandboxLock, error) {
	unlock, err := pods.Lock(ctx, id)
	if err != nil {
		return ctx, nil, fmt.Errorf("ocicni: waiting for pod %s: %w", id, err)
	}
	fl, err := st.led.LockSandbox(ctx, id, how == lockTry)
	switch {
	case err == nil:
		st.fault.worked()
		return pluginexec.WithInherited(ctx, fl.Inheritable()), &sandboxLock{file: fl, unlock: unlock}, nil
	case errors.Is(err, locks.ErrUnavailable):
		st.fault.failed(err)
		if how == lockBest {
			return ctx, &sandboxLock{unlock: unlock}, nil
		}
	}
	unlock()
	return ctx, nil, fmt.Errorf("ocicni: waiting for pod %s in another engine: %w", id, err)
}

// release releases the lock file (see [ledger.SandboxLock.Release]),
// then the keyed lock.
func (l *sandboxLock) release() {
	if l.file != nil {
		l.file.Release()
	}
	l.unlock()
}

// lockFault is whether the node-wide lock files were last found unusable
// (see [locks.ErrUnavailable]), so that the change is logged once each
// way and the state is reported ([Manager.Health], the gauge
// [telemetry.MetricLocksDegraded]). mu is a leaf lock.
type lockFault struct {
	log      *logrus.Entry
	degraded atomic.Bool // read without mu on every lock taken
	mu       sync.Mutex  // guards cause, and serializes the changes
	cause    error
}

// failed records that a lock file could not be used, for err.
func (f *lockFault) failed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cause = err
	if !f.degraded.Swap(true) && f.log != nil {
		f.log.WithError(err).Warn("The node-wide lock files cannot be used; pod teardowns go on under this " +
			"process's locks alone, and setups refuse until they can be used again")
	}
}

// worked records that a sandbox's lock file could be used.
func (f *lockFault) worked() {
	if !f.degraded.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.degraded.Swap(false) && f.log != nil {
		f.log.Info("The node-wide lock files can be used again")
	}
	f.cause = nil
}

// state returns whether the lock files are degraded, and why.
func (f *lockFault) state() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.degraded.Load(), f.cause
}

// defaultTakeover is how long after it took a sandbox's lock file a
// holder that is gone may keep it, where a network sets no timeout for
// its plugins (see [engine.takeoverAfter]).
const defaultTakeover = 3 * time.Minute

// takeoverAfter is how long after it took a sandbox's lock file a holder
// whose process has ended may keep it, through the plugins it ran and their children, before another
// engine takes the sandbox over (see [locks.Takeover]): the longest that
// a plugin of any loaded network may run, with [defaultTakeover] for a
// verb without a timeout. A plugin that ran longer was to be killed; a
// holder past it is a daemon that inherited the file.
func (e *engine) takeoverAfter() time.Duration {
	longest := time.Duration(0)
	pick := func(t Timeouts) {
		for _, d := range []time.Duration{t.Add, t.Del, t.Check} {
			if d <= 0 {
				d = defaultTakeover
			}
			longest = max(longest, d)
		}
	}
	pick(e.opts.timeouts)
	for _, n := range e.snapshot().All() {
		pick(n.Timeouts.Or(e.opts.timeouts))
	}
	return longest
}

// tookOver logs the takeover of sandbox id's lock file from gone.
func (e *engine) tookOver(id string, gone locks.Stamp) {
	e.log.WithFields(logrus.Fields{"sandbox": id, "holder": gone.Owner, "since": gone.At}).
		Warn("Took over the lock of a sandbox that no live engine holds: its holder is gone, and what holds " +
			"the lock now (a plugin's child that inherited it) has outlived every plugin timeout")
}

// othersWorkGrace is how long before a GC began another engine's work on
// a sandbox still keeps GC off it: a runtime takes its valid pods some
// time before it calls GC (ocicnitool gc --valid "$(crictl pods -q)"
// first runs crictl), and a setup that another engine finished meanwhile
// is missing from them.
const othersWorkGrace = 10 * time.Second

// othersWorkedOn is GC's one test of whether another engine or process
// that still runs worked on a sandbox while GC ran or shortly before, by
// the stamp of the sandbox's lock file (see [locks.FileLock.Stamp]): GC
// then leaves the sandbox alone, since its valid pods may be out of
// date. This engine's own setups are in watch instead, and the work of an
// engine that has ended (shut down, or its process gone, as before a
// runtime's restart) keeps nothing.
func (e *engine) othersWorkedOn(s locks.Stamp, watch *setupWatch) bool {
	return s.Owner != e.store.led.Owner() && !s.At.Before(watch.began.Add(-othersWorkGrace)) && s.Live()
}

// lockNode takes the gate, then the node gate, exclusively, for GC's
// node-wide phase, and returns their unlock. It holds this engine's pods
// back for at most the gate's Patience.Hold at a time: when other engines'
// pod operations keep the node gate, it lets go of both and tries again.
func (e *engine) lockNode(ctx context.Context) (func(), error) {
	for {
		if err := e.gate.Lock(ctx); err != nil {
			return nil, fmt.Errorf("waiting for the pod operations in flight: %w", err)
		}
		node, err := e.store.led.LockNode(ctx, e.opts.gatePatience.Hold)
		if err == nil {
			return func() { node.Unlock(false); e.gate.Unlock() }, nil
		}
		e.gate.Unlock()
		if !errors.Is(err, locks.ErrBusy) {
			return nil, fmt.Errorf("waiting for other engines' pod operations: %w", err)
		}
		pause := time.NewTimer(locks.NodePause)
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return nil, fmt.Errorf("waiting for other engines' pod operations: %w", context.Cause(ctx))
		}
	}
}

// beginPodOp validates the pod's identity and takes its locks, for the
// verbs that need nothing else checked first. The plugins run under the
// context it returns hold the pod's lock file (see
// [sandboxStore.lockSandbox]).
func (e *engine) beginPodOp(ctx context.Context, pod *PodNetwork) (context.Context, func(), *logrus.Entry, error) {
	if err := checkPodArgs(pod); err != nil {
		return ctx, nil, nil, err
	}
	ctx, l, err := e.lease(ctx, pod.ID, lockBest)
	if err != nil {
		return ctx, nil, nil, err
	}
	return ctx, l.release, e.podLog(pod), nil
}
