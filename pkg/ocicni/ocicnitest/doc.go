// Package ocicnitest lets a container runtime's unit tests run pod setup,
// teardown, status and GC through package ocicni without root and without
// plugin binaries.
//
// A test builds an [Env] (temporary directories and a [FakeExec]), writes
// network configs, creates a manager with [Env.NewManager] (or
// ocicni.New(env.Options()...)), and drives it as the runtime does:
//
//	env := ocicnitest.NewEnv(t)
//	env.WriteConflist(t, "podnet", "1.0.0", "bridge", "portmap")
//	m := env.NewManager(t)
//	res, err := m.SetUpPod(ocicni.PodNetwork{Name: "web", Namespace: "ns",
//		ID: "pod1", NetNS: env.NetNS(t, "pod1")})
//	...
//	calls := env.Exec.Calls() // ADD podnet eth0 pod1, twice: bridge, portmap
//
// Every helper also exists without a testing.TB ([NewEnvAt],
// [WriteConflist], [WriteCacheEntry], [WriteOrder], [NewNetNS]), returning
// an error, for code that has no test to fail, such as examples.
//
// # Fake plugins
//
// [FakeExec] is an invoke.Exec: libcni runs every plugin through it, and
// nothing is started. Its FindInPath finds every plugin type without a
// file on disk, or only those named with [FakeExec.OnlyPlugins]. Without a
// script it answers:
//
//   - VERSION: every spec version libcni knows, or those set with
//     [FakeExec.PluginVersions];
//   - ADD: for the first plugin of a list, a result with one interface,
//     named after CNI_IFNAME, inside CNI_NETNS, with a deterministic MAC
//     and the next IP of the network's subnet ([FakeExec.Subnet], else
//     [DefaultSubnet], shared by every network without one; the gateway
//     is the subnet's first host), at the config's cniVersion, so that
//     [ocicni.SandboxIPs] finds it; a chained plugin passes its prevResult
//     on;
//   - DEL, CHECK, GC and STATUS: success.
//
// Scripts are per network (the config's "name") and verb, and hold until
// [FakeExec.Clear]: [FakeExec.Result] sets what every plugin of the
// network prints; [FakeExec.Fail] makes it fail, with a *types.Error for
// a plugin's error, so that errors.As reaches its code; [FakeExec.Hang]
// holds the call until its context ends or the hang is released. VERSION
// calls carry no network: script them with network "".
//
// A script by plugin type, [FakeExec.FailPlugin], fails a verb of every
// plugin of that type, whatever the network: a broken binary's VERSION.
//
// Every call is recorded before it is answered, as a [Call]: verb,
// network, plugin type, container ID, netns, ifname, CNI_ARGS as a map,
// the whole environment ([Call.Getenv]), and stdin raw and decoded.
// [FakeExec.Calls] returns them in order, leaving out the VERSION calls
// that the manager makes in the background unless asked for by name;
// [FakeExec.Count] counts the calls that a [Match] selects, and
// [FakeExec.Lookups] the FindInPath calls for a plugin.
//
// # Gates
//
// [FakeExec.Gate] holds the calls that a [Match] selects (by verb,
// network and plugin type) between recording and answering them, until
// the test releases the [Gate]. The test waits for the event "the code
// under test is inside the call" with [Gate.WaitEntered], acts while the
// call is held, and calls [Gate.Release]; nothing is proven by sleeping.
// A held call ends early with its context's error, unless the gate was
// made with [IgnoreContext], which plays a plugin that ignores
// cancellation.
//
// # Finding plugins
//
// [FakeExec.SetFindMode] changes how FindInPath finds plugins: without
// looking at the disk ([FindAny], the default), only where a file of the
// plugin's name exists ([FindOnDisk], for tests that install and remove
// plugins while the manager watches its bin dirs), or under any name,
// path separators included ([FindUnchecked], for tests of the manager's
// own checks on plugin types).
//
// # Network namespaces
//
// Setup and status also work inside the pod's netns without a plugin: lo
// is set up, checked, and an interface's addresses are read when no
// result is cached. The manager does this through [ocicni.NetNSOps],
// which [Env.Options] replaces with the FakeExec ([ocicni.WithNetNSOps]):
// it keeps a set of netns paths whose lo is "up", and answers address
// reads from the results of the ADDs that succeeded and were not deleted.
//
// The validation of the netns path itself is not replaced. Setup requires
// the path to be absolute, clean, existing and not the host's network
// namespace, which needs no root: it is one stat. [NewNetNS] (and
// [Env.NetNS]) therefore makes an empty regular file to stand in for the
// namespace, which passes it, and the seam stays limited to the work that
// enters a namespace. A runtime's test thus still gets the manager's
// InvalidArgumentError for a netns path that is relative, missing or the
// host's, as in production. Removing the file plays a namespace that is
// gone: teardown and GC still run DEL, and status fails.
//
// # Files
//
// [WriteConflist] writes a network config list into a conf dir, named so
// that the network written first is the default one. [WriteCacheEntry]
// writes the libcni cache entry that an ADD would have left, by running
// libcni's own ADD against a private FakeExec, so the file is in libcni's
// format whatever its version; use it for a teardown from the cache or a
// GC of an attachment that no pod owns any more. [WriteOrder] writes the
// manager's attachment order record through package cache.
//
// # Limits
//
// The fake is not a plugin: it does not check a config the way a real
// plugin would, keeps no IPAM state but a counter (addresses are never
// reused; concurrent setups get addresses in the order their ADDs run),
// and its interfaces exist only in its own memory. The default
// executor's process handling (process groups, kills on timeout) is not
// exercised. Tests of that, and of real plugins in real namespaces, need
// root; see the manager's own tests.
package ocicnitest
