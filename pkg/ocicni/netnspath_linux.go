package ocicni

import "golang.org/x/sys/unix"

// onProcFS reports whether dir lies on a procfs mount, wherever it is
// mounted.
func onProcFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
