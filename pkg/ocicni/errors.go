package ocicni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/internal/locks"
	"github.com/seed-671fdd43/ocicni/internal/netconf"
	"github.com/seed-671fdd43/ocicni/internal/netns"
	"github.com/seed-671fdd43/ocicni/internal/pluginexec"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNoDefaultNetwork means no valid default network is loaded.
	ErrNoDefaultNetwork = errors.New("ocicni: no default network")
	// ErrNetworkNotFound means a requested network is not loaded.
	ErrNetworkNotFound = netconf.ErrNetworkNotFound
	// ErrInvalidArgument marks bad input from the caller: an empty or
	// hostile container ID, interface name or network name, a bad netns
	// path, static IP or MAC, duplicate interface names, or a CNI_ARGS value
	// that would inject a key.
	ErrInvalidArgument = errors.New("ocicni: invalid argument")
	// ErrInvalidConfig marks a configuration file that cannot be used.
	ErrInvalidConfig = netconf.ErrInvalidConfig
	// ErrPluginNotFound means a plugin binary is missing from every bin dir.
	ErrPluginNotFound = netconf.ErrPluginNotFound
	// ErrUnsupportedVersion means a plugin does not support the
	// configuration's cniVersion.
	ErrUnsupportedVersion = netconf.ErrUnsupportedVersion
	// ErrVersionFailed means a plugin binary failed to answer VERSION, or
	// did not answer in time. It is not asked again until it changes.
	ErrVersionFailed = netconf.ErrVersionFailed
	// ErrVersionPending means a plugin binary has not answered VERSION
	// yet; its network is loaded by the reload that follows the answer.
	ErrVersionPending = netconf.ErrVersionPending
	// ErrNotRegularFile marks a config file that is not a regular file (a
	// FIFO, a device, a socket, a directory), so it is not read.
	ErrNotRegularFile = fsutil.ErrNotRegular
	// ErrFileTooLarge marks a config file larger than [MaxConfigFileSize].
	ErrFileTooLarge = fsutil.ErrTooLarge
	// ErrShutdown is kept for source compatibility with earlier versions
	// of this package. No method returns it: after [Manager.Shutdown] the
	// manager keeps serving, as cri-o/ocicni's does.
	ErrShutdown = errors.New("ocicni: manager is shut down")
	// ErrUnsupportedPlatform is returned, off Linux, by operations that
	// enter a network namespace.
	ErrUnsupportedPlatform = netns.ErrUnsupported
	// ErrRollbackPending is matched by a [SetupError] returned when the
	// caller's context ended during setup: the call returned at once, and
	// the rollback of what was attached goes on in the background, holding
	// the pod's lock, under [WithRollbackTimeout].
	ErrRollbackPending = errors.New("ocicni: rollback still running in the background")
	// ErrNotAdmitted is matched, with the context's error, by the error
	// of a setup or teardown whose context ended while it waited for its
	// turn to run plugins (see [Admission]): nothing ran
	// and nothing changed, so the caller may simply call again.
	ErrNotAdmitted = errors.New("ocicni: context ended while waiting for admission; nothing ran")
	// ErrNoConfig means an attachment has neither a loaded config nor a
	// cache entry, so no plugin can be run for it.
	ErrNoConfig = errors.New("ocicni: no config and no cache entry for attachment")
	// ErrGCVerbsSkipped is matched by the *[NetworkError] (Verb "GC") that
	// [Manager.GC] returns for a network it did not send the GC verb to:
	// its context ended while pod operations held the gate (see
	// [Manager.GC] for how long GC holds new ones back), or the verbs
	// of the networks before it used up their bound. The error also
	// matches the context's error. Nothing was lost: the next GC sends
	// the verb.
	ErrGCVerbsSkipped = errors.New("ocicni: GC verb not sent; the next GC sends it")
	// ErrLibraryPanic is matched by every [*PanicError]: a panic inside
	// libcni, recovered where the engine calls it.
	ErrLibraryPanic = guard.ErrPanic
	// ErrPluginOutputLimit is matched by every [*PluginOutputLimitError]:
	// a plugin printed more than [MaxPluginStdout] or [MaxPluginStderr].
	ErrPluginOutputLimit = pluginexec.ErrOutputLimit
	// ErrAttachmentLive is matched by every *[AttachedError]: a setup
	// asked for an attachment that its sandbox already holds, live (its
	// ADD succeeded and no DEL was asked for since), in a way that
	// differs from how it was added. Nothing ran; tear the sandbox down
	// first.
	ErrAttachmentLive = errors.New("ocicni: attachment already live")
	// ErrStateNotRecorded is matched by every *[RecordError]: the plugins
	// ran, but what they did could not be written to the cache dir.
	ErrStateNotRecorded = errors.New("ocicni: outcome not recorded in the cache dir")
	// ErrLocksUnavailable is matched by the error of a setup that refused
	// to run because its sandbox's lock file could not be had for a file
	// system reason (see [Health].LocksDegraded). Teardowns run all the
	// same.
	ErrLocksUnavailable = locks.ErrUnavailable
)

// RecordError is the error of a teardown whose DELs ran (each with the
// outcome the rest of the error, if any, reports) but whose outcome could
// not be committed to the cache dir: a read-only or full file system, an
// I/O error. The order record and the cache entries still say the
// attachments are live. With healing on (see [WithHealing]), the manager
// runs their DELs again in the background, which DEL's idempotence makes
// harmless, and commits once the cache dir can be written: nothing is
// left, with no further call. It matches [ErrStateNotRecorded] and
// unwraps to the cause.
type RecordError struct {
	ContainerID string
	Err         error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("ocicni: pod %s: the DELs ran, but their outcome could not be recorded: %v", e.ContainerID, e.Err)
}

// Is reports whether target is [ErrStateNotRecorded].
func (e *RecordError) Is(target error) bool { return target == ErrStateNotRecorded }

func (e *RecordError) Unwrap() error { return e.Err }

// Caps on what the default executor keeps of one plugin run's output. A
// plugin that prints more is killed with its process group, and the run
// fails with a *[PluginOutputLimitError]. An error quotes at most
// [PluginOutputQuoteLimit] bytes of a plugin's output; a [PluginHook]
// gets all of it (see [PluginRun]).
const (
	MaxPluginStdout        = pluginexec.MaxStdout
	MaxPluginStderr        = pluginexec.MaxStderr
	PluginOutputQuoteLimit = pluginexec.QuoteLimit
)

// PluginOutputLimitError is the failure of a plugin run that printed more
// than the cap of one of its streams: the plugin and its process group
// were killed. It matches [ErrPluginOutputLimit]. A DEL that fails so is
// retried as any failed DEL.
//
//	type PluginOutputLimitError struct {
//		Plugin string // the binary's path
//		Stream string // "stdout" or "stderr"
//		Limit  int64  // the stream's cap in bytes
//		Head   []byte // the start of what it printed there
//	}
//
// (It is defined in the internal package that runs plugins.)
type PluginOutputLimitError = pluginexec.OutputLimitError

// AttachedError refuses a setup, before anything runs, that would ADD an
// attachment again while the sandbox holds it live: the CNI spec forbids
// a second ADD of one (network, container, ifname) without a DEL between
// them, and the rollback of a failed second ADD would delete what the
// first setup returned. Reason says what differs from the live
// attachment (its config, netns or runtime arguments); Err is a cause,
// such as a cached result that cannot be read. It matches
// [ErrAttachmentLive].
//
// A setup never runs ADD again for an attachment its sandbox holds live
// (a runtime retrying RunPodSandbox with the same ID, callers racing on
// one ID), and its rollback never deletes one: the spec forbids a second
// ADD without a DEL between, plugins refuse it ("eth0 already exists"),
// and that rollback would delete what the first setup returned. An
// attachment is live when its cache entry is readable and accepted and
// its record line, if any, records no failed DEL. Under the sandbox's
// lock, before anything runs, each requested attachment that is live and
// identical to the request (network, ifname, config bytes, netns, CNI_ARGS
// and runtime config as at its ADD) gets its cached result and no plugin;
// one that differs, or whose result cannot be read, refuses the whole
// setup with an *[AttachedError] ([ErrAttachmentLive]); the others are
// added, and only they are rolled back. The repeat runs no CHECK.
type AttachedError struct {
	ContainerID string
	Network     string
	IfName      string
	Reason      string
	Err         error // optional cause
}

func (e *AttachedError) Error() string {
	msg := fmt.Sprintf("ocicni: setting up pod %s: network %q (ifname %q) is already attached and %s; tear the sandbox down first",
		e.ContainerID, e.Network, e.IfName, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrAttachmentLive.
func (e *AttachedError) Is(target error) bool { return target == ErrAttachmentLive }

// Unwrap returns the cause, if any.
func (e *AttachedError) Unwrap() error { return e.Err }

// PanicError is a panic inside libcni, recovered where the engine calls
// it: its Op names the verb, File the cache entry libcni may have been
// reading. It matches [ErrLibraryPanic]. The engine treats that entry as
// corrupt: the DEL runs again without the cached result, and the entry
// stays until a DEL succeeds.
type PanicError = guard.PanicError

// InvalidArgumentError names the offending field of a rejected request.
// It satisfies errors.Is(err, ErrInvalidArgument).
//
// Requests are validated before anything runs: container IDs, network
// names and ifnames as libcni's ADD validates them, plus path checks and
// the lengths [cache.MaxContainerIDLen] (128), [cache.MaxNetworkNameLen]
// (100) and [cache.MaxIfNameLen] (15), which keep libcni's cache file name
// within 255 bytes; pod name and namespace up to [MaxPodNameLen], UID up
// to [MaxPodUIDLen], none with ';', '=' or control characters (they go
// into CNI_ARGS); netns paths absolute, clean, existing for setup, and
// never the caller's own or init's network namespace. A netns path that
// leads, by name or through symbolic links, to /proc/self or
// /proc/thread-self (/proc/self/ns/net, /dev/fd/N) is refused too: each
// process that opens it sees its own namespace, so a plugin would find the
// host's there whatever the manager's threads see. /proc/<pid>/ns/net is
// fine. Invalid static IPs or MACs and duplicate requested interface
// names are refused too. A context that is already done starts nothing.
// Every rejection is an [InvalidArgumentError] naming the field, returned
// before any file is touched or any plugin runs.
type InvalidArgumentError struct {
	Field  string
	Value  string
	Reason string
	Err    error // optional cause
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("ocicni: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidArgument.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the underlying cause, if any.
func (e *InvalidArgumentError) Unwrap() error { return e.Err }

func invalidArg(field, value, reason string) error {
	return &InvalidArgumentError{Field: field, Value: value, Reason: reason}
}

// ConfigError explains why a configuration file was skipped. Err wraps
// one of [ErrInvalidConfig], [ErrPluginNotFound], [ErrUnsupportedVersion],
// [ErrVersionFailed] or [ErrVersionPending]. A file that could not be read
// safely wraps ErrInvalidConfig and [ErrNotRegularFile] or
// [ErrFileTooLarge].
//
//	type ConfigError struct {
//		File    string
//		Network string // empty when the file could not be parsed far enough
//		Err     error
//	}
//
// (It is defined in the internal package that loads config files.)
//
// Config files, cache entries and order records are written by other
// components and survive crashes and hand edits, so none is trusted:
//   - Only regular files are read (a symlink in the conf dir must lead to
//     one; the cache holds no symlinks), never with a blocking open, and
//     never more than [MaxConfigFileSize] or [cache.MaxFileSize] bytes.
//   - Every network name, container ID and ifname read from a cache entry
//     or a record passes the same validation as a request's before it
//     becomes a path, an environment variable or a plugin run, and must
//     agree with the entry's own file name and cached config; an entry that
//     does not is corrupt and is acted on only by its file name.
//   - A netns path read from the cache is used only when it is absolute,
//     clean, not per-process (see [InvalidArgumentError]) and not the host's network
//     namespace; otherwise DEL runs without one (plugins still release
//     IPAM).
//   - libcni reads a cache entry (as prevResult, and to remove it) only
//     when the inventory accepted it and libcni can decode its result;
//     every other DEL runs with libcni pointed at an empty cache dir, and
//     the file is removed once DEL succeeded.
//   - Every call from the manager's goroutines into libcni is behind a
//     recover: a panic (libcni's result converters have panicked on
//     nulls in cached results) becomes a [*PanicError] naming the file,
//     matching [ErrLibraryPanic], and that entry is handled as corrupt:
//     DEL again without its result, and the file kept until DEL succeeds.
type ConfigError = netconf.ConfigError

// NetworkNotFoundError is returned when a requested network is not loaded.
// Skipped lists the files that declare that network but were skipped, with
// the reason. It satisfies errors.Is(err, ErrNetworkNotFound), and unwraps
// to ErrNetworkNotFound and every skip reason.
//
//	type NetworkNotFoundError struct {
//		Network string
//		ConfDir string
//		Skipped []*ConfigError
//	}
//
// (It is defined in the internal package that loads config files.)
type NetworkNotFoundError = netconf.NetworkNotFoundError

// NetworkError is the failure of one verb on one attachment. It unwraps to
// the cause, so a plugin's *types.Error stays reachable with errors.As.
type NetworkError struct {
	Network string
	IfName  string
	Verb    string // ADD, CHECK, DEL, GC or STATUS
	Err     error
}

func (e *NetworkError) Error() string {
	if e.IfName == "" {
		return fmt.Sprintf("%s network %q: %v", e.Verb, e.Network, e.Err)
	}
	return fmt.Sprintf("%s network %q (ifname %q): %v", e.Verb, e.Network, e.IfName, e.Err)
}

func (e *NetworkError) Unwrap() error { return e.Err }

// TimeoutError reports plugin runs that a network's own timeout for the
// verb ended (see [Timeouts]), not the caller's deadline. It matches
// context.DeadlineExceeded with errors.Is, so a DEL it ended is retried
// like any other that ran out of time.
type TimeoutError struct {
	Network string
	Verb    string // ADD, DEL or CHECK
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("ocicni: network %q: %s took longer than its timeout of %v (%s or WithNetworkTimeouts)",
		e.Network, e.Verb, e.Timeout, TimeoutsKey)
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// SetupError is returned when a SetUpPod fails. Err is the failure of
// the attachment that stopped setup (a *NetworkError for a plugin failure).
// The rollback of the attachments already made has one of three states:
//   - finished: Rollback is nil and RollbackPending false;
//   - failed: Rollback holds the failed DELs;
//   - still running, in the background, because the caller's context had
//     ended (Cause): RollbackPending is true and the error matches
//     [ErrRollbackPending] and Cause with errors.Is. A teardown or setup of
//     the same sandbox waits for it; its outcome is logged.
//
// [Manager.SetUpPodWithContext] validates the request before any plugin
// runs (see [InvalidArgumentError]), sets lo up in the netns without a plugin
// (through [NetNSOps], which [WithNetNSOps] replaces in tests), records
// the attachment order in the cache, and runs ADD for each network in
// order, with the CNI_ARGS and runtime-config capabilities ocicni passes
// (portMappings, bandwidth, ipRanges, aliases, cgroupPath,
// io.kubernetes.cri.pod-annotations, static IP and MAC). Interface names
// are the requested ones, or eth0, eth1, ... skipping names already taken.
//
// When network k fails ADD, the manager runs DEL for network k and then
// for those of networks k-1 ... 0 that this call added (see [AttachedError]), best effort, under its own timeout
// ([WithRollbackTimeout]), and returns a [SetupError] holding the ADD
// error and any rollback failures. When the caller's context ends before
// the rollback does (also when the ADD failed at once and the rollback is
// slow), the call returns at the deadline instead: the SetupError matches
// the context's error and [ErrRollbackPending], and the rollback finishes
// in the background, holding the sandbox's lock (and no node-wide lock),
// so that the next operation on the sandbox waits for it.
// [Manager.ForgetPodCache] drops a sandbox's cache entries on purpose,
// recording their attachments first so that GC still deletes them.
type SetupError struct {
	ContainerID     string
	Err             error
	Rollback        *TeardownError
	RollbackPending bool
	Cause           error // the context's error when the context ended
}

// withRollback returns e with the rollback's failures, if any.
func (e *SetupError) withRollback(rerr *TeardownError) *SetupError {
	if rerr != nil {
		e.Rollback = rerr
	}
	return e
}

func (e *SetupError) Error() string {
	msg := fmt.Sprintf("ocicni: setting up pod %s: %v", e.ContainerID, e.Err)
	switch {
	case e.RollbackPending:
		msg += "; rollback continues in the background"
	case e.Rollback != nil:
		msg += "; rollback also failed: " + e.Rollback.summary()
	}
	return msg
}

// Unwrap returns the setup failure, then the context's error and
// [ErrRollbackPending] while the rollback runs, or every rollback failure.
func (e *SetupError) Unwrap() []error {
	errs := []error{e.Err}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.RollbackPending {
		errs = append(errs, ErrRollbackPending)
	}
	if e.Rollback != nil {
		errs = append(errs, e.Rollback.Unwrap()...)
	}
	return errs
}
