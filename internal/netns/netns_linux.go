//go:build linux

package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// RunDir is where [New] pins the namespaces it creates.
const RunDir = "/run/netns"

// ErrNotNetNS is returned when a path exists but is not a network namespace.
var ErrNotNetNS = errors.New("netns: not a network namespace")

var seq atomic.Uint64

// Do runs fn inside the network namespace at path. The path must be
// absolute. A missing path yields an error that satisfies
// errors.Is(err, fs.ErrNotExist).
func Do(path string, fn func() error) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("netns: path %q is not absolute", path)
	}
	target, err := openNS(path)
	if err != nil {
		return err
	}
	defer target.Close()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread when the thread could not be
		// restored: the runtime then terminates the thread.
		orig, err := os.Open(threadNSPath())
		if err != nil {
			errc <- fmt.Errorf("netns: open current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: restore namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// openNS opens path and verifies that it is a network namespace.
func openNS(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: statfs %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotNetNS, path)
	}
	return f, nil
}

func threadNSPath() string {
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
}

// New creates a new network namespace pinned at RunDir/<unique name> and
// returns its path.
//
// The namespace is created by a thread that enters it and then goes back
// to the namespace it came from. A thread left inside would not do: the
// runtime terminates the thread of a goroutine that exits locked to it,
// except the process's main thread, which it parks for good instead.
// Parked there, the main thread would keep the namespace, and every
// interface in it, alive after [Remove].
//
// RunDir is first made a shared mount of its own, as "ip netns add" makes
// it: otherwise the first "ip netns add" on the machine bind-mounts RunDir
// over itself, and the pins made before it are hidden under that mount,
// where they can be neither unmounted nor removed by path.
func New() (string, error) {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return "", fmt.Errorf("netns: %w", err)
	}
	if err := shareRunDir(); err != nil {
		return "", err
	}
	name := "ocicni-" + strconv.Itoa(os.Getpid()) + "-" +
		strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "-" + strconv.FormatUint(seq.Add(1), 10)
	path := filepath.Join(RunDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("netns: create %s: %w", path, err)
	}
	f.Close()

	errc := make(chan error, 1)
	go func() { errc <- create(path) }()
	if err := <-errc; err != nil {
		_ = unix.Unmount(path, unix.MNT_DETACH)
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// shareRunDir makes RunDir a shared mount, bind-mounting it over itself
// first when it is not a mount point, as iproute2 does.
// Processes that make their first pins at once take turns (a lock on
// RunDir), so that no two bind mounts stack.
func shareRunDir() error {
	dir, err := os.Open(RunDir)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer dir.Close()
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("netns: locking %s: %w", RunDir, err)
	}
	err = unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point
		if err = unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("netns: making %s a shared mount: %w", RunDir, err)
	}
	return nil
}

// create makes a new network namespace, bind-mounts it at path, and puts
// the calling thread back into its namespace. The thread stays locked to
// the goroutine, so that the runtime ends it, when it cannot be put back.
func create(path string) error {
	runtime.LockOSThread()
	orig, err := os.Open(threadNSPath())
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: open current namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: unshare: %w", err)
	}
	merr := unix.Mount(threadNSPath(), path, "none", unix.MS_BIND, "")
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(merr, fmt.Errorf("netns: restore namespace: %w", err))
	}
	runtime.UnlockOSThread()
	if merr != nil {
		return fmt.Errorf("netns: bind mount %s: %w", path, merr)
	}
	return nil
}

// Remove unmounts and deletes a namespace created by [New]. A path that no
// longer exists is not an error.
func Remove(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}
