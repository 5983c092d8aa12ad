// Package engine is the layout tool's fixture: a Manager whose teardown
// passes the pod through three files and back.
package engine

// Pod is what a teardown passes on.
type Pod struct{ ID string }

// Manager has two methods.
type Manager struct{ d *detacher }

// TearDown hands the pod to the detacher.
func (m *Manager) TearDown(pod Pod) error { return m.d.tearDown(pod) }

// Name passes nothing on.
func (m *Manager) Name() string { return label("engine") }

func label(s string) string { return s }
