package fsutil

import "golang.org/x/sys/unix"

// OnProcFS reports whether dir lies on a procfs mount, wherever it is
// mounted.
func OnProcFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
