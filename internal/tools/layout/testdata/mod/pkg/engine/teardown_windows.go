package engine

// stopWindows would be a fourth file and a third method of Manager if
// the tool read files that do not build on linux/amd64.
func (m *Manager) stopWindows(pod Pod) error { return m.d.tearDown(pod) }
