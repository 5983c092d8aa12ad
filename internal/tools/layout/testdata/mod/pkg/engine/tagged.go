//go:build darwin

package engine

func (m *Manager) stopDarwin(pod Pod) error { return m.d.tearDown(pod) }
