package ocicni

// This file holds what the manager does with netns paths (which it
// accepts, see [InvalidArgumentError]) and inside namespaces
// (NetNSOps).

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"strings"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/netns"
)

// maxNetNSLinks bounds the symbolic links [checkPerProcessPath] follows,
// as the kernel does (MAXSYMLINKS).
const maxNetNSLinks = 40

// checkPerProcessPath refuses a netns path whose meaning depends on the
// process that opens it: one that leads, lexically or through symbolic
// links, to "self" or "thread-self" in a procfs root (/proc/self/ns/net,
// /dev/fd/N, a link to either). Such a path names the opener's own
// namespace, so the plugin, a child process, would find the host's there
// whatever the manager sees. /proc/<pid>/... paths mean the same for
// every process and are accepted.
//
// p must be absolute and clean. It is resolved one component at a time
// with Lstat and Readlink, following at most [maxNetNSLinks] links. A
// component that cannot be resolved (missing, not a directory, not
// searchable) ends the walk and the path is accepted: the plugin, which
// runs with the manager's credentials, cannot open the path through it
// either, and a vanished netns must stay usable for DEL. A procfs "magic"
// link whose target is not a path (net:[4026531840], pipe:[…]) names a
// fixed object; it is not followed.
func checkPerProcessPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return nil // not a Unix path (Windows); no netns can be entered there
	}
	resolved, rest := "/", p[1:] // resolved holds no symbolic link
	links := 0
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		if (comp == "self" || comp == "thread-self") && procDir(resolved) {
			return perProcessError(p, path.Join(resolved, comp), links)
		}
		next := path.Join(resolved, comp)
		target, isLink, ok := readLink(next)
		switch {
		case !ok:
			return nil // see the doc comment
		case !isLink:
			resolved = next
			continue
		case magicLink(target) && procDir(resolved):
			return nil
		}
		if links++; links > maxNetNSLinks {
			return invalidArg(fieldNetNS, p, fmt.Sprintf("leads through more than %d symbolic links (a loop?)", maxNetNSLinks))
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		rest = target + "/" + rest
	}
	return nil
}

// perProcessError is the error for netns path p, which reaches the
// per-process path at, through links symbolic links.
func perProcessError(p, at string, links int) error {
	via := "names"
	if links > 0 {
		via = "leads through symbolic links to"
	}
	return invalidArg(fieldNetNS, p, fmt.Sprintf(
		"%s a per-process path (%s): each process that opens it sees its own namespace", via, at))
}

// readLink returns the target of path when it is a symbolic link; ok is
// false when path cannot be resolved (missing, not searchable, replaced
// between the two calls).
func readLink(path string) (target string, isLink, ok bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", false, false
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", false, true
	}
	target, err = os.Readlink(path)
	if err != nil {
		return "", false, false
	}
	return target, true, true
}

// magicLink reports whether target, read from a link in procfs, names a
// kernel object (net:[4026531840], anon_inode:inotify) rather than a path.
func magicLink(target string) bool {
	first, _, _ := strings.Cut(target, "/")
	return !strings.HasPrefix(target, "/") && strings.Contains(first, ":")
}

// procDir reports whether dir, a path free of symbolic links, is /proc or
// a directory of any procfs mount (see [fsutil.OnProcFS]).
func procDir(dir string) bool {
	return dir == "/proc" || strings.HasPrefix(dir, "/proc/") || fsutil.OnProcFS(dir)
}

// NetNSOps is what the manager does inside a pod's network namespace
// itself, without a plugin. These are the manager's only operations that
// enter a namespace, and so the only ones, besides the plugins, that need
// root. The default implementation does them in the kernel (Linux only);
// [WithNetNSOps] replaces it, as [WithExec] replaces the plugins, so that
// a runtime's unit tests run setup and status without root (package
// ocicnitest provides one).
//
// The netns path passed in has been validated: absolute, clean, not
// per-process (/proc/self/...), and not the host's network namespace. At
// setup it exists; at status it is the caller's, which may name a
// namespace that is gone.
type NetNSOps interface {
	// LoopbackUp sets lo up in the netns. Setup calls it before it
	// records the attachment order, and no plugin receives an ADD config
	// before it returned; an error fails the setup with nothing attached.
	LoopbackUp(ctx context.Context, netnsPath string) error
	// LoopbackCheck returns an error unless lo is up in the netns.
	// Status calls it before it reports any network.
	LoopbackCheck(ctx context.Context, netnsPath string) error
	// InterfaceAddrs returns the MAC and the global unicast addresses of
	// ifname in the netns, and an error when it has none. Status calls it
	// for an attachment that has no readable cached result.
	InterfaceAddrs(ctx context.Context, netnsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error)
}

// kernelNetNS is the default NetNSOps: it enters the namespace.
type kernelNetNS struct{}

var _ NetNSOps = kernelNetNS{}

func (kernelNetNS) LoopbackUp(_ context.Context, nsPath string) error {
	return netns.LoopbackUp(nsPath)
}

func (kernelNetNS) LoopbackCheck(_ context.Context, nsPath string) error {
	return netns.LoopbackCheck(nsPath)
}

func (kernelNetNS) InterfaceAddrs(_ context.Context, nsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	return netns.GlobalAddrs(nsPath, ifname)
}
