package ocicni

import "time"

// PendingTeardown is an attachment whose DEL failed and that the manager
// retries in the background (see [HealPolicy]), or gave up retrying.
type PendingTeardown struct {
	ContainerID string
	Network     string
	IfName      string
	// Attempts counts the failed DELs so far.
	Attempts int
	// Since is when the first DEL failed; NextAttempt when the next retry
	// is due (zero once GaveUp).
	Since, NextAttempt time.Time
	LastError          string
	// GaveUp is set once the horizon passed: no more retries; the
	// attachment stays recorded for GC.
	GaveUp bool
}

// PendingTeardowns lists, from the order records in the cache dir, every
// attachment whose DEL failed and has not succeeded since, sorted by
// container and ADD order. It reads the records of every manager that
// shares the cache dir.
func (m *Manager) PendingTeardowns() ([]PendingTeardown, error) {
	ids, err := m.cache.ListOrders()
	if err != nil {
		return nil, err
	}
	var out []PendingTeardown
	for _, id := range ids {
		record, err := m.cache.ReadOrder(id)
		if err != nil {
			continue
		}
		for _, a := range record {
			if h := a.Heal; h != nil {
				out = append(out, PendingTeardown{
					ContainerID: id, Network: a.Network, IfName: a.IfName,
					Attempts: h.Attempts, Since: h.Since, NextAttempt: h.Next, LastError: h.LastError, GaveUp: h.GaveUp,
				})
			}
		}
	}
	return out, nil
}
