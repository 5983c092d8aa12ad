package testenv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes on a new temporary directory, for a
// test that needs a file system it can fill, and unmounts it when the
// test ends. It skips the test without root (see [RequireRoot]).
func Tmpfs(tb testing.TB, size int64) string {
	tb.Helper()
	RequireRoot(tb)
	dir := tb.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		"size="+strconv.FormatInt(size, 10)+",mode=0700"); err != nil {
		tb.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	tb.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FreeBytes returns what statfs says an unprivileged writer may still
// write to the file system of dir.
func FreeBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		tb.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize //nolint:gosec // block counts fit an int64
}

// FillTo writes the file filler, on the file system of its directory, so
// that free bytes at most are left there, and returns what statfs then
// says is free: free rounded down to the file system's block size (a
// tmpfs allocates whole pages). The filler's content is written, not
// left sparse, since a sparse file holds no blocks.
func FillTo(tb testing.TB, filler string, free int64) int64 {
	tb.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(filler), &st); err != nil {
		tb.Fatalf("statfs %s: %v", filepath.Dir(filler), err)
	}
	avail := int64(st.Bavail) * st.Bsize //nolint:gosec // block counts fit an int64
	want := free / st.Bsize * st.Bsize
	if avail < want {
		tb.Fatalf("cannot leave %d bytes free on %s: only %d are", free, filepath.Dir(filler), avail)
	}
	if err := os.WriteFile(filler, make([]byte, avail-want), 0o600); err != nil {
		tb.Fatalf("write the filler %s: %v", filler, err)
	}
	got := FreeBytes(tb, filler)
	if got != want {
		tb.Fatalf("the filler %s leaves %d bytes free, want %d", filler, got, want)
	}
	return got
}

// Tree returns every file and directory under dir, by slash-separated
// path relative to dir, with its size (-1 for a directory), so that a
// test can compare what a call left with what was there before it.
func Tree(tb testing.TB, dir string) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() {
			out[filepath.ToSlash(rel)] = -1
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fi.Size()
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("walk %s: %v", dir, err)
	}
	return out
}
