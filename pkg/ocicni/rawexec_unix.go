//go:build unix

package ocicni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
)

const (
	// pluginWaitDelay bounds how long a finished or killed plugin's stdout
	// and stderr may stay open, held by a process that escaped its group.
	pluginWaitDelay = 2 * time.Second
	// textBusyRetries and textBusyDelay are invoke.RawExec's retries of a
	// plugin binary that is being written ("text file busy").
	textBusyRetries = 5
	textBusyDelay   = time.Second
)

// groupExec runs plugins as invoke.RawExec does (same stdin, environment,
// trace context, stderr passthrough, and conversion of failures to
// *types.Error), but starts each plugin as the leader of a process group
// of its own. When the context is done before the plugin exits, the whole
// group gets SIGKILL: the plugin and every process it started that stayed
// in the group. A plugin that exits on its own has nothing killed, so a
// daemon it leaves behind keeps running. Background DELs run at a low
// CPU priority (see backgroundNice).
//
// A process that outlives the plugin (one that left the group with setsid
// or setpgid before a kill, or any child of a plugin that exited on its
// own) may hold the plugin's stdout or stderr open: ExecPlugin still
// returns at most waitDelay after the plugin ended, by closing those pipes.
type groupExec struct {
	stderr    io.Writer
	waitDelay time.Duration
}

var _ rawExec = (*groupExec)(nil)

// newRawExec returns the executor that kills a plugin's process group.
func newRawExec(stderr io.Writer) rawExec {
	return &groupExec{stderr: stderr, waitDelay: pluginWaitDelay}
}

func (e *groupExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	environ = injectTraceContext(ctx, environ)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, notStarted(err, pluginPath)
		}
		stdout, stderr, err := e.run(ctx, pluginPath, stdinData, environ)
		var gerr *gateError
		if errors.As(err, &gerr) {
			return nil, gerr.err
		}
		if errors.Is(err, syscall.ETXTBSY) && attempt < textBusyRetries {
			waitCtx(ctx, textBusyDelay)
			continue
		}
		if err != nil {
			return nil, pluginErr(err, stdout, stderr)
		}
		// The plugin may print to both stdout and stderr; stderr is only
		// informational, so a failure to copy it does not matter.
		if e.stderr != nil && len(stderr) > 0 {
			_, _ = e.stderr.Write(stderr)
		}
		return stdout, nil
	}
}

// run runs the plugin once, in a process group of its own, and returns
// what it printed.
func (e *groupExec) run(ctx context.Context, pluginPath string, stdinData []byte, environ []string) (stdout, stderr []byte, err error) {
	var outBuf, errBuf bytes.Buffer
	cmdCtx := ctx
	var stdin io.Reader = bytes.NewReader(stdinData)
	var gated *gatedStdin
	if g := addGateOf(ctx); g != nil {
		var kill context.CancelFunc
		cmdCtx, kill = context.WithCancel(ctx)
		defer kill()
		gated = &gatedStdin{ctx: ctx, gate: g, kill: kill, stdin: stdin}
		stdin = gated
	}
	cmd := exec.CommandContext(cmdCtx, pluginPath)
	cmd.Env = environ
	cmd.Stdin = stdin
	cmd.Stdout = &outBuf
	cmd.Stderr = &errBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = e.waitDelay
	start := cmd.Start
	if inBackground(ctx, environ) {
		start = func() error { return startBackground(cmd) }
	}
	if err = start(); err == nil {
		err = cmd.Wait()
	}
	if gated != nil {
		if gerr := gated.gate.wait(ctx); gerr != nil {
			// Killed before it read its config (or never started): the
			// gate's error is the run's.
			return nil, nil, &gateError{err: gerr}
		}
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		// The plugin exited 0 after printing its output, but a process
		// that it left behind held a pipe open past waitDelay. The output
		// is the plugin's; a truncated result would fail to decode.
		err = nil
	}
	return outBuf.Bytes(), errBuf.Bytes(), err
}

// gateError carries the error of an addGate that opened with one to a run
// of a plugin that was killed waiting for it.
type gateError struct{ err error }

func (e *gateError) Error() string { return e.err.Error() }

// rawExecGatesStdin reports whether r holds back a plugin's stdin until
// its addGate opens: groupExec does.
func rawExecGatesStdin(r rawExec) bool {
	_, ok := r.(*groupExec)
	return ok
}

// killGroup sends SIGKILL to the process group that the plugin p leads.
// The group keeps p's pid as its id while any member lives, even if p
// exited on its own just as the context ended (then the rest of the group
// is killed, since the context is done). If the group cannot be
// signalled, p alone is killed.
func killGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH):
		return os.ErrProcessDone // the whole group has exited already
	default:
		return p.Kill()
	}
}

// pluginErr converts a failed run into the *types.Error that
// invoke.RawExec returns: the plugin's JSON error from stdout when there
// is one, else a message with its stderr and the exit status.
func pluginErr(err error, stdout, stderr []byte) error {
	emsg := types.Error{}
	switch {
	case len(stdout) == 0 && len(stderr) == 0:
		emsg.Msg = fmt.Sprintf("netplugin failed with no error message: %v", err)
	case len(stdout) == 0:
		emsg.Msg = fmt.Sprintf("netplugin failed: %q: %v", string(stderr), err)
	default:
		if perr := json.Unmarshal(stdout, &emsg); perr != nil {
			emsg.Msg = fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", string(stdout), perr)
		}
	}
	return &emsg
}

func (e *groupExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}
