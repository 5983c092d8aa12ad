// Command recorder is a fault-injecting CNI plugin for tests. It records
// every call to a log and takes its behaviour for each verb from its
// network configuration.
//
// # Configuration
//
// On top of the standard plugin keys (cniVersion, name, type, prevResult,
// runtimeConfig, ...), the netconf may hold:
//
//	{
//	  "logFile": "/abs/path/calls.jsonl",
//	  "endLogFile": "/abs/path/ends.jsonl",
//	  "add":    {Behaviour},
//	  "del":    {Behaviour},
//	  "check":  {Behaviour},
//	  "gc":     {Behaviour},
//	  "status": {Behaviour}
//	}
//
// A Behaviour has these keys, all optional:
//
//   - "sleepMs": after logging the call, sleep this many milliseconds
//     before acting. Tests use it only for a plugin that must outlast a
//     context deadline; to hold a plugin while the test acts, they use
//     "enteredFile" and "waitForFile".
//   - "enteredFile": an absolute path. Once inside the verb (after logging
//     the call and after "childPidFile"), append one line
//     "VERB containerID ifname" to this file, creating it if needed. Each
//     call appends with a single write, so the number of lines is the
//     number of calls that got this far, however many run at once.
//   - "waitForFile": an absolute path. After "enteredFile", wait until this
//     file exists (polling every few milliseconds), then go on with the
//     rest of the behaviour. Together the two make a barrier: a test waits
//     for enteredFile, acts while the plugin is held, and creates
//     waitForFile to release it. A file that exists already does not hold
//     the plugin at all.
//   - "waitMaxMs": how long "waitForFile" waits at most, 60000 when unset.
//     When the file has not appeared by then, the call fails with code 999
//     (internal error), so a test that forgets to release a plugin fails
//     instead of hanging.
//   - "childPidFile": an absolute path. After logging the call (and before
//     "enteredFile"), start a child process that inherits the plugin's stdout
//     and stderr and sleeps for an hour, write the child's pid to this file
//     (through a rename, so it is never read half-written), and go on with
//     the rest of the behaviour. The plugin never waits for the child, so
//     whoever reads the plugin's stdout sees it open until the child ends.
//     The child is the recorder binary run again with OCICNI_RECORDER_CHILD
//     set. A test that leaves it running kills it.
//   - "errorCode", "errorMsg": fail with a CNI error (types.Error). A
//     message without a code fails with code 999 (internal error); a code
//     without a message gets a default message.
//   - "crash": write non-JSON garbage to stdout and exit with status 2.
//   - "onlyIfExists": an absolute path; the sleep, error or crash applies
//     only while this file exists (checked before the sleep, and again
//     after it for the error or crash). Because DEL runs with the config
//     of the ADD, this is how a test clears a fault after ADD.
//   - "result" (ADD only): raw JSON printed to stdout verbatim, so a test can
//     return a 0.2.0 result or a result without interfaces. A JSON string
//     is printed unquoted, so "result": "not json" makes a successful ADD
//     print garbage.
//   - "emptyResult" (ADD only): print a valid result with no interfaces, IPs
//     or routes, in the configuration's cniVersion: {"cniVersion":V} for
//     1.x, {"cniVersion":V,"dns":{}} for 0.1.0 to 0.4.0 (no "ip4" for 0.1.0
//     and 0.2.0). libcni parses all of these without error.
//
// The steps run in this order: log the call, "childPidFile",
// "enteredFile", "waitForFile", "sleepMs", then the crash or error (subject
// to "onlyIfExists") or, for ADD, the result. A crash wins over an error,
// and "result" over "emptyResult", when both are set.
//
// # Defaults
//
// ADD without "result" or "emptyResult" passes prevResult through, converted
// to the configuration's cniVersion, or prints the empty result when there
// is no prevResult. DEL, CHECK, GC and STATUS succeed silently.
//
// # Call log
//
// When "logFile" is set, every ADD, DEL, CHECK, GC and STATUS call appends
// one calllog.Call line before acting, so failing calls are logged too.
// VERSION is answered by skel and not logged. Tests read the log with
// calllog.Read.
//
// When "endLogFile" is set, every call that logged its start appends one
// more line to that file as it returns, with its verb, container,
// interface, network, PID and the time it ended, whether it failed or
// not; a plugin killed first logs no end. calllog.Spans pairs the two
// logs, and calllog.Overlaps finds the calls on one container that ran
// at once.
package main
