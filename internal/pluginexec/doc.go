// Package pluginexec runs CNI plugin binaries for libcni: the mechanism
// below pkg/ocicni's executor, which adds the manager's policy (the
// environment, the hook and its reasons, which runs are background ones)
// and calls into this package. Nothing here knows of the manager.
//
// # Executor
//
// [Exec] is an invoke.Exec: what invoke.DefaultExec is, with the raw
// executor of [NewRaw] in place of invoke.RawExec. On unix, [NewRaw] runs
// each plugin as invoke.RawExec does (same stdin, environment, trace
// context, stderr passthrough, and *types.Error for a failure), with
// these differences:
//   - The plugin leads a process group of its own. When the context ends
//     before the plugin exits, the whole group gets SIGKILL; a plugin that
//     exits on its own has nothing killed.
//   - Its stdout and stderr go to files in memory that are read once it
//     has exited, and its stdin is a pipe written whole, so a process it
//     leaves behind cannot hold the run open.
//   - Those files cannot grow past [MaxStdout] and [MaxStderr] (and one
//     page): a plugin that prints more is killed with its group, and the
//     run fails with an [OutputLimitError]. A plugin that reopens its
//     stdout by name (/dev/stdout) writes past what is read, and cannot
//     truncate or append to it.
//   - Its errors quote at most [QuoteLimit] bytes of what it printed;
//     [WithOutput] gets all of it.
//   - A context that is already done starts no plugin: the error wraps the
//     context's (see [NotStarted]).
//   - A binary that is being written ("text file busy") is retried, as
//     invoke.RawExec does.
//   - A file carried by the context ([WithInherited]), a held lock file,
//     is the plugin's file descriptor 3.
//
// Elsewhere [NewRaw] is invoke.RawExec.
//
// # Gate
//
// A [Gate] carried by the context ([WithGate]) holds back a plugin's
// config until the caller is ready for the plugin to act: [Exec] on unix
// starts the plugin at once and feeds its stdin only once the gate opens,
// so the process start overlaps the caller's work. When the gate opens
// with an error, the plugin is killed before it read anything, and the
// run returns that error. [GatesStdin] tells whether an executor does
// this; any other executor must be called only once the gate is open.
//
// # Priority
//
// A context marked by [WithLowPriority] runs its plugins at the lowest CPU
// priority: on Linux at SCHED_IDLE and nice [LowNice] in every thread from
// the first (see [StartLowPriority]), on other unix systems at nice
// [LowNice].
package pluginexec
