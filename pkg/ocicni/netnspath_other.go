//go:build !linux

package ocicni

// onProcFS has no portable answer; [procDir] still knows /proc by name.
func onProcFS(string) bool { return false }
