// Package testenv holds the helpers that tests and benchmarks in other
// packages share: building the plugins, allocating networks and namespaces,
// and writing configurations.
//
// # Plugins
//
// [BuildPlugins] builds the reference CNI plugins pinned by the tools module
// ([ReferencePlugins]) and the [Recorder] fake plugin into a fresh
// directory. A package's TestMain calls it once, usually through
// [MainWithPlugins]:
//
//	var pluginDir string
//
//	func TestMain(m *testing.M) { os.Exit(testenv.MainWithPlugins(m, &pluginDir)) }
//
// Builds go to a per-checkout staging directory in the user cache, guarded
// by a file lock, so that a re-run (or another package's TestMain running
// at the same time) only re-links what changed. The binaries are then
// hard-linked into the fresh directory. Set [PluginDirEnv] to a directory
// that already holds every binary to skip building altogether.
//
// # Networks and namespaces
//
// [Alloc] hands out a bridge name and subnet that no other test process on
// the machine holds, and deletes the bridge when the test ends. [NewNS]
// creates a network namespace that is removed when the test ends. Both
// register their cleanup with tb.Cleanup. Tests that touch the kernel call
// [RequireRoot] first.
//
// # Configurations
//
// [BridgeConflist], [Conflist] and [RecorderConf] build network
// configurations; [WriteFile] writes them. [Reservations] and [AddrsIn]
// inspect what the plugins did.
//
// # Barriers
//
// [NewBarrier] holds a recorder verb while the test acts: the test puts
// [Barrier.Behaviour] under the verb's key in [RecorderConf], waits with
// [Barrier.WaitEntered] until the plugin is inside the verb, does what must
// overlap with the call, and lets the call finish with [Barrier.Release].
// Tests synchronize on these events, never on a plugin that sleeps.
//
// # Processes
//
// [ReadPidFile], [ProcessGone] and [KillOnCleanup] follow processes that a
// plugin started (see the recorder's "childPidFile"), so that a test can
// check that they were killed and make sure none outlives it.
package testenv
