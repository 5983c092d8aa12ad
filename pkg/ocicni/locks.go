package ocicni

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/ledger"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// defaultGatePatience lets pods in for a second before GC holds them
// back, for at most a fifth of a second at a time (see locks.Gate).
var defaultGatePatience = locks.Patience{Idle: time.Second, Hold: 200 * time.Millisecond}

// lease takes, in the documented order, the shared gate, the node gate
// shared (so that another engine's GC verbs wait for it), the pod's lock
// and the sandbox's lock file (so that no engine or process on the node
// runs an operation on the sandbox meanwhile), and returns ctx bound to
// the lock file (see [sandboxStore.lockSandbox]). A GC DEL (try) does not
// wait for another engine's hold of the sandbox: it gets
// [locks.ErrBusy].
func (e *engine) lease(ctx context.Context, id string, try bool) (context.Context, *podLocks, error) {
	if err := e.gate.RLock(ctx); err != nil {
		return ctx, nil, fmt.Errorf("ocicni: waiting for GC: %w", err)
	}
	node, err := e.store.led.RLockNode(ctx)
	if err != nil {
		e.gate.RUnlock()
		return ctx, nil, fmt.Errorf("ocicni: waiting for another engine's GC: %w", err)
	}
	ctx, sb, err := e.store.lockSandbox(ctx, e.pods, id, try)
	if err != nil {
		node.Unlock(false)
		e.gate.RUnlock()
		return ctx, nil, err
	}
	return ctx, &podLocks{gate: e.gate, node: node, sandbox: sb}, nil
}

// podLocks is the shared gates and one pod's locks, held together. A
// background rollback drops the gates early and keeps the pod's locks.
type podLocks struct {
	gate     *locks.Gate
	node     *locks.FileLock
	gateOnce sync.Once
	sandbox  *sandboxLock
}

// dropGate releases the gates, once.
func (l *podLocks) dropGate() {
	l.gateOnce.Do(func() {
		l.node.Unlock(false)
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
	file   *ledger.SandboxLock
	unlock func() // the keyed lock's
}

// lockSandbox takes sandbox id's lock in pods, then its lock file, which
// holds across engines and processes. With try it returns an error
// matching [locks.ErrBusy] at once when another engine holds the file.
//
// The context it returns marks the plugins run under it to inherit the
// lock file (see [pluginexec.WithInherited]): a plugin that outlives this
// process, killed in the middle of an operation, keeps the sandbox
// locked until it exits, so that no other engine runs a plugin on the
// sandbox beside it. The plugins must have ended when the lock is
// released.
func (st *sandboxStore) lockSandbox(ctx context.Context, pods *locks.Keyed, id string, try bool) (context.Context, *sandboxLock, error) {
	unlock, err := pods.Lock(ctx, id)
	if err != nil {
		return ctx, nil, fmt.Errorf("ocicni: waiting for pod %s: %w", id, err)
	}
	fl, err := st.led.LockSandbox(ctx, id, try)
	if err != nil {
		unlock()
		return ctx, nil, fmt.Errorf("ocicni: waiting for pod %s in another engine: %w", id, err)
	}
	return pluginexec.WithInherited(ctx, fl.Inheritable()), &sandboxLock{file: fl, unlock: unlock}, nil
}

// release releases the lock file (see [ledger.SandboxLock.Release]),
// then the keyed lock.
func (l *sandboxLock) release() {
	l.file.Release()
	l.unlock()
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
	ctx, l, err := e.lease(ctx, pod.ID, false)
	if err != nil {
		return ctx, nil, nil, err
	}
	return ctx, l.release, e.podLog(pod), nil
}
