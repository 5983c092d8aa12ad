package ocicni

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/internal/locks"
)

// defaultGatePatience lets pods in for a second before GC holds them
// back, for at most a fifth of a second at a time (see locks.Gate).
var defaultGatePatience = locks.Patience{Idle: time.Second, Hold: 200 * time.Millisecond}

// lease takes the shared gate and the pod's lock, in the documented order.
func (m *Manager) lease(ctx context.Context, id string) (*podLease, error) {
	if err := m.gate.RLock(ctx); err != nil {
		return nil, fmt.Errorf("ocicni: waiting for GC: %w", err)
	}
	unlockPod, err := m.pods.Lock(ctx, id)
	if err != nil {
		m.gate.RUnlock()
		return nil, fmt.Errorf("ocicni: waiting for pod %s: %w", id, err)
	}
	return &podLease{gate: m.gate, unlockPod: unlockPod}, nil
}

// podLease is the shared gate and one pod's lock, held together. A
// background rollback drops the gate early and keeps the pod's lock.
type podLease struct {
	gate      *locks.Gate
	gateOnce  sync.Once
	unlockPod func()
}

// dropGate releases the gate, once.
func (l *podLease) dropGate() { l.gateOnce.Do(l.gate.RUnlock) }

// release releases the pod's lock, then the gate if it is still held.
func (l *podLease) release() {
	l.unlockPod()
	l.dropGate()
}

// beginPodOp validates the pod's identity and takes its locks, for the
// verbs that need nothing else checked first.
func (m *Manager) beginPodOp(ctx context.Context, pod *PodNetwork) (func(), *logrus.Entry, error) {
	if err := checkPodArgs(pod); err != nil {
		return nil, nil, err
	}
	l, err := m.lease(ctx, pod.ID)
	if err != nil {
		return nil, nil, err
	}
	return l.release, m.podLog(pod), nil
}

func (m *Manager) podLog(pod *PodNetwork) *logrus.Entry {
	return m.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "sandbox": pod.ID})
}

// debugEnabled reports whether log writes Debug lines. Their fields are
// built only then: logrus builds an entry's fields whatever the level.
func debugEnabled(log *logrus.Entry) bool { return log.Logger.IsLevelEnabled(logrus.DebugLevel) }

func planLog(log *logrus.Entry, p *plan, verb string) *logrus.Entry {
	return log.WithFields(logrus.Fields{"network": p.Name, "ifname": p.Ifname, "verb": verb})
}
