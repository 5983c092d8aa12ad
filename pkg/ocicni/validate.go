package ocicni

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Field names of [InvalidArgumentError], as the checks below report them.
const (
	fieldContainerID = "container ID"
	fieldNetwork     = "network name"
	fieldIfName      = "interface name"
	fieldNetNS       = "netns path"
)

// Length limits of the request fields that reach CNI_ARGS. The names that
// become part of cache file names are bounded by [cache.MaxNetworkNameLen],
// [cache.MaxContainerIDLen] and [cache.MaxIfNameLen].
const (
	// MaxPodNameLen bounds PodNetwork.Name and PodNetwork.Namespace
	// (Kubernetes allows 253 bytes for object names).
	MaxPodNameLen = 253
	// MaxPodUIDLen bounds PodNetwork.UID (a Kubernetes UID has 36 bytes).
	MaxPodUIDLen = 128
)

// invalidName turns a *cache.InvalidNameError into an *InvalidArgumentError
// for field.
func invalidName(field, v string, err error) error {
	reason := err.Error()
	var ine *cache.InvalidNameError
	if errors.As(err, &ine) {
		reason = ine.Reason
	}
	return &InvalidArgumentError{Field: field, Value: v, Reason: reason, Err: err}
}

// checkContainerID validates a sandbox ID for any verb: it becomes part of
// cache file paths and of CNI_ARGS. The rules are libcni's ADD rules plus
// the path checks and a length limit, see [cache.ValidateContainerID].
func checkContainerID(id string) error {
	if err := cache.ValidateContainerID(id); err != nil {
		return invalidName(fieldContainerID, id, err)
	}
	return nil
}

// checkNetworkName validates a network name; see
// [cache.ValidateNetworkName].
func checkNetworkName(name string) error {
	if err := cache.ValidateNetworkName(name); err != nil {
		return invalidName(fieldNetwork, name, err)
	}
	return nil
}

// checkIfname validates an interface name; see [cache.ValidateIfName].
func checkIfname(ifname string) error {
	if err := cache.ValidateIfName(ifname); err != nil {
		return invalidName(fieldIfName, ifname, err)
	}
	return nil
}

// checkArgValue rejects CNI_ARGS values that could inject another key, and
// values longer than maxLen.
func checkArgValue(field, v string, maxLen int) error {
	if len(v) > maxLen {
		return invalidArg(field, v, fmt.Sprintf("is %d bytes long, more than %d", len(v), maxLen))
	}
	if strings.ContainsAny(v, ";=") {
		return invalidArg(field, v, `contains ";" or "=", which would inject CNI_ARGS keys`)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return invalidArg(field, v, "contains a control character")
	}
	return nil
}

// checkPodArgs validates the pod fields that go into CNI_ARGS and file
// names, before anything runs.
func checkPodArgs(pod *PodNetwork) error {
	if err := checkContainerID(pod.ID); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"pod name", pod.Name, MaxPodNameLen},
		{"pod namespace", pod.Namespace, MaxPodNameLen},
		{"pod UID", pod.UID, MaxPodUIDLen},
	} {
		if err := checkArgValue(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return nil
}

// checkNetNS validates the netns path given to SetUpPod: an absolute,
// clean path that exists, means the same for every process (not under
// /proc/self) and is not the caller's own network namespace (plugins
// would then configure the host).
func checkNetNS(path string) error {
	if err := checkNetNSPath(path); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return &InvalidArgumentError{Field: fieldNetNS, Value: path, Reason: "does not exist", Err: err}
	}
	if hostNetNS(fi) {
		return invalidArg(fieldNetNS, path, "is the host's network namespace")
	}
	return nil
}

// checkNetNSPath checks the form of a netns path (see
// [cache.ValidateNetNSPath]) and refuses one whose meaning depends on the
// process that opens it, such as /proc/self/ns/net (see
// [checkPerProcessPath]).
func checkNetNSPath(path string) error {
	if err := cache.ValidateNetNSPath(path); err != nil {
		return invalidName(fieldNetNS, path, err)
	}
	return checkPerProcessPath(path)
}

// threadNetNSPath names the calling thread's network namespace, which
// plugins inherit. /proc/self is not used: it names the thread group
// leader, which a program that once left a locked thread in another
// namespace can have stranded there.
const threadNetNSPath = "/proc/thread-self/ns/net"

// initNetNS is init's network namespace, where readable: stat'ed once,
// since no process changes it (nil when it cannot be read).
var initNetNS = sync.OnceValue(func() os.FileInfo {
	fi, err := os.Stat("/proc/1/ns/net")
	if err != nil {
		return nil
	}
	return fi
})

// hostNetNS reports whether fi, the result of stat on a netns path, is one
// of the network namespaces a plugin must never be run in: the calling
// thread's or init's.
func hostNetNS(fi os.FileInfo) bool {
	if initNS := initNetNS(); initNS != nil && os.SameFile(fi, initNS) {
		return true
	}
	thread, err := os.Stat(threadNetNSPath)
	return err == nil && os.SameFile(fi, thread)
}

// usableStoredNetNS returns the netns path read from a cache entry or an order
// record when a plugin may run in it, and "" otherwise: a path of the
// wrong form, a per-process one, or one that names the host's namespace.
// A path that no longer exists is kept (DEL must still run for a vanished
// netns).
func usableStoredNetNS(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if err := checkNetNSPath(path); err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && hostNetNS(fi) {
		return "", invalidArg(fieldNetNS, path, "is the host's network namespace")
	}
	return path, nil
}
