package ocicni

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// leftovers is everything an attachment can leave behind once every pod
// has been torn down and GC has run with no valid pod. The fault tests
// (churn and crash recovery) require all of it to be empty.
type leftovers struct {
	// Reservations maps a network to its host-local reservations, each
	// as "ip (owner)" with the owner read from the reservation file.
	Reservations map[string][]string
	// PluginState lists files in host-local's data dir other than
	// reservations and its own bookkeeping (lock, last_reserved_ip.*).
	PluginState []string
	// BridgePorts maps a test bridge to the host-side veths enslaved to it.
	BridgePorts map[string][]string
	// NetnsLinks maps a pod netns that still exists to its interfaces
	// other than lo.
	NetnsLinks map[string][]string
	// CacheEntries are libcni result-cache files.
	CacheEntries []string
	// OrderRecords are attachment order records, including the temporary
	// files of an interrupted write, but not the retired records a Cache
	// keeps for reuse (cache.IsSpareFile).
	OrderRecords []string
	// LockFiles are sandboxes' lock files, which go with their sandbox's
	// record. The node gate's two files (.node, .turn) stay for good and
	// are left out.
	LockFiles []string
	// OtherCacheFiles are any other files under the cache dir.
	OtherCacheFiles []string
	// KeptConfigs are shared copies of saved configs that no record
	// links (a link left would be among OrderRecords): a Cache keeps the
	// 16 it saved last for its next setups, and GC removes them once they
	// are 10 minutes old. Not leftovers of a pod; requireNoLeftovers
	// bounds them.
	KeptConfigs []string
	// Processes are plugin processes (binaries of the plugin dir) that
	// are still running.
	Processes []string
	// NetnsHandles are the test process's handles on namespaces other
	// than its network namespace (see netnsHandles); filled only by tests that
	// run alone, after every pod netns was removed.
	NetnsHandles []string
}

// count is the number of leftover items.
func (l *leftovers) count() int {
	n := len(l.PluginState) + len(l.CacheEntries) + len(l.OrderRecords) + len(l.LockFiles) + len(l.OtherCacheFiles) +
		len(l.Processes) + len(l.NetnsHandles)
	for _, m := range []map[string][]string{l.Reservations, l.BridgePorts, l.NetnsLinks} {
		for _, v := range m {
			n += len(v)
		}
	}
	return n
}

func (l *leftovers) String() string {
	if l.count() == 0 {
		return "none"
	}
	var parts []string
	add := func(what string, items []string) {
		if len(items) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", what, strings.Join(items, ", ")))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(l.Reservations)) {
		add("reservations on "+k, l.Reservations[k])
	}
	add("host-local state files", l.PluginState)
	for _, k := range slices.Sorted(maps.Keys(l.BridgePorts)) {
		add("veths on bridge "+k, l.BridgePorts[k])
	}
	for _, k := range slices.Sorted(maps.Keys(l.NetnsLinks)) {
		add("links in netns "+k, l.NetnsLinks[k])
	}
	add("cache entries", l.CacheEntries)
	add("order records", l.OrderRecords)
	add("sandbox lock files", l.LockFiles)
	add("other cache files", l.OtherCacheFiles)
	add("plugin processes", l.Processes)
	add("netns handles", l.NetnsHandles)
	return strings.Join(parts, "; ")
}

// owners returns the container IDs that leftovers name: those owning a
// reservation, a cache entry or an order record, as far as known.
func (l *leftovers) owners(ids []string) []string {
	var out []string
	all := slices.Concat(l.CacheEntries, l.OrderRecords, l.LockFiles, l.OtherCacheFiles)
	for _, v := range l.Reservations {
		all = append(all, v...)
	}
	for _, id := range ids {
		if slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, id) }) {
			out = append(out, id)
		}
	}
	return out
}

// scanLeftovers looks for leftovers of the networks (name to bridge) and
// the pod netns paths. Interfaces in a netns that no longer exists went
// with it, so only existing ones are looked into.
func (e *itEnv) scanLeftovers(networks map[string]testenv.Net, netnsPaths []string) *leftovers {
	e.t.Helper()
	l := &leftovers{Reservations: map[string][]string{}, BridgePorts: map[string][]string{}, NetnsLinks: map[string][]string{}}
	e.scanNetworks(l, networks)
	l.PluginState = e.pluginState()
	e.scanNetns(l, netnsPaths)
	e.scanCache(l)
	l.Processes = pluginProcesses(e.t)
	return l
}

// scanNetworks adds to l each network's host-local reservations, with
// their owners, and the ports left on its bridge.
func (e *itEnv) scanNetworks(l *leftovers, networks map[string]testenv.Net) {
	e.t.Helper()
	t := e.t
	for name, n := range networks {
		for _, ip := range testenv.Reservations(t, e.dataDir, name) {
			owner, _ := os.ReadFile(filepath.Join(e.dataDir, name, ip))
			l.Reservations[name] = append(l.Reservations[name],
				fmt.Sprintf("%s (%s)", ip, strings.Join(strings.Fields(string(owner)), " ")))
		}
		if ports := bridgePorts(t, n.Bridge); len(ports) > 0 {
			l.BridgePorts[n.Bridge] = ports
		}
	}
}

// pluginState lists the files in host-local's data dir other than
// reservations (named by their IP) and its own bookkeeping. A missing
// data dir holds none.
func (e *itEnv) pluginState() []string {
	e.t.Helper()
	t := e.t
	des, err := os.ReadDir(e.dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
	var out []string
	for _, d := range des {
		files, err := os.ReadDir(filepath.Join(e.dataDir, d.Name()))
		require.NoError(t, err)
		for _, f := range files {
			n := f.Name()
			if net.ParseIP(n) == nil && n != "lock" && !strings.HasPrefix(n, "last_reserved_ip.") {
				out = append(out, filepath.Join(d.Name(), n))
			}
		}
	}
	return out
}

// scanNetns adds to l the interfaces other than lo in each pod netns that
// still exists.
func (e *itEnv) scanNetns(l *leftovers, netnsPaths []string) {
	e.t.Helper()
	for _, ns := range netnsPaths {
		if _, err := os.Stat(ns); err != nil {
			continue
		}
		if links := slices.DeleteFunc(linksIn(e.t, ns), func(s string) bool { return s == "lo" }); len(links) > 0 {
			l.NetnsLinks[ns] = links
		}
	}
}

// scanCache adds to l the files under the cache dir, sorted into result
// cache entries, order records and anything else. A missing cache dir
// holds none.
func (e *itEnv) scanCache(l *leftovers) {
	e.t.Helper()
	results := filepath.Join(e.cacheDir, "results")
	orders := filepath.Join(e.cacheDir, "ocicni", "attachments")
	configs := filepath.Join(e.cacheDir, "ocicni", "configs")
	lockDir := filepath.Join(e.cacheDir, "ocicni", "locks")
	err := filepath.WalkDir(e.cacheDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Dir(path) {
		case results:
			l.CacheEntries = append(l.CacheEntries, d.Name())
		case lockDir:
			if !strings.HasPrefix(d.Name(), ".") {
				l.LockFiles = append(l.LockFiles, d.Name())
			}
		case orders:
			if !cache.IsSpareFile(d.Name()) { // kept for reuse, bounded: not a pod's
				l.OrderRecords = append(l.OrderRecords, d.Name())
			}
		case configs:
			if fi, err := d.Info(); err == nil && fi.Sys().(*syscall.Stat_t).Nlink == 1 {
				l.KeptConfigs = append(l.KeptConfigs, d.Name())
			} else {
				l.OtherCacheFiles = append(l.OtherCacheFiles, path)
			}
		default:
			l.OtherCacheFiles = append(l.OtherCacheFiles, path)
		}
		return nil
	})
	if !errors.Is(err, fs.ErrNotExist) {
		require.NoError(e.t, err)
	}
}

// bridgePorts lists the interfaces enslaved to bridge; a bridge that does
// not exist has none.
func bridgePorts(t *testing.T, bridge string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

// pluginProcesses lists the running processes whose binary is in the
// plugin dir, as "pid (name)". Zombies have ended and are left out.
func pluginProcesses(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, d := range des {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != pluginDir || testenv.ProcessGone(t, pid) {
			continue // not ours, or it ended meanwhile
		}
		out = append(out, fmt.Sprintf("%d (%s)", pid, filepath.Base(exe)))
	}
	return out
}

// requireNoLeftovers fails the test with every leftover it finds, and
// returns them for logging. The kernel removes the host veths of deleted
// namespaces asynchronously, and killed plugins are reaped asynchronously,
// so it first waits, with a deadline, for bridge ports and plugin
// processes to go.
func (e *itEnv) requireNoLeftovers(networks map[string]testenv.Net, netnsPaths []string) *leftovers {
	e.t.Helper()
	for deadline := time.Now().Add(testenv.BarrierTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ports := 0
		for _, n := range networks {
			ports += len(bridgePorts(e.t, n.Bridge))
		}
		if ports == 0 && len(pluginProcesses(e.t)) == 0 {
			break
		}
	}
	l := e.scanLeftovers(networks, netnsPaths)
	assert.Zero(e.t, l.count(), "leftovers: %s", l)
	// One copy per distinct config, and no Cache keeps more than 16.
	assert.LessOrEqual(e.t, len(l.KeptConfigs), 16, "saved configs kept: %v", l.KeptConfigs)
	return l
}

// portCount is the number of veths left on the bridges.
func portCount(l *leftovers) int {
	n := 0
	for _, ports := range l.BridgePorts {
		n += len(ports)
	}
	return n
}

// netnsHandles lists this process's handles on namespaces other than its
// network namespace, the one it started in (its parent's; not its main
// thread's, which is the one a leak would park): open descriptors of a
// namespace, whatever path opened it ("fd 7: /run/netns/x (nsfs inode
// 4026532)"), and threads inside another network namespace ("thread 123:
// net:[4026532]"). Either keeps a namespace, and the veths in it, alive
// after its bind mount is removed.
func netnsHandles(t *testing.T) []string {
	t.Helper()
	ownPath := fmt.Sprintf("/proc/%d/ns/net", os.Getppid())
	own, err := os.Readlink(ownPath)
	require.NoError(t, err)
	var ownSt syscall.Stat_t
	require.NoError(t, syscall.Stat(ownPath, &ownSt))
	var out []string
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, fd := range fds {
		p := filepath.Join("/proc/self/fd", fd.Name())
		var fs syscall.Statfs_t
		var st syscall.Stat_t
		if syscall.Statfs(p, &fs) != nil || fs.Type != unix.NSFS_MAGIC || syscall.Stat(p, &st) != nil || st.Ino == ownSt.Ino {
			continue // closed meanwhile, or not a namespace, or our own
		}
		l, _ := os.Readlink(p)
		out = append(out, fmt.Sprintf("fd %s: %s (nsfs inode %d)", fd.Name(), l, st.Ino))
	}
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, task := range tasks {
		l, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns", "net"))
		if err == nil && l != own {
			out = append(out, "thread "+task.Name()+": "+l)
		}
	}
	return out
}

// netnsHandles sees a descriptor open on a netns, and no longer once it is
// closed.
func TestNetnsHandles(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t)
	ns := testenv.NewNS(t)
	f, err := os.Open(ns)
	require.NoError(t, err)
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	require.NoError(t, err)
	var st syscall.Stat_t
	require.NoError(t, syscall.Fstat(int(f.Fd()), &st))
	mine := fmt.Sprintf("fd %d: %s (nsfs inode %d)", f.Fd(), target, st.Ino)
	assert.Contains(t, netnsHandles(t), mine)
	require.NoError(t, f.Close())
	assert.NotContains(t, netnsHandles(t), mine)
}
