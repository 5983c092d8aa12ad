//go:build unix

package pluginexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/seed-671fdd43/ocicni/internal/bgwork"
)

const (
	// pluginWaitDelay bounds how long Wait waits for a plugin after its
	// group was killed, before it kills the plugin alone.
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
// daemon it leaves behind keeps running. The runs of a context marked by
// [WithLowPriority] start at the lowest CPU priority (see
// StartLowPriority).
//
// A plugin writes its stdout and stderr into files in memory (see
// newCapture), which are read once it has exited, and reads its config
// from a pipe that is written whole and closed as soon as it has started
// (or its [Gate] has opened). So a run needs no goroutine to copy
// output, and a process that outlives the plugin (a daemon it started,
// one that left the group before a kill) cannot hold the run open by
// keeping a pipe open. invoke.RawExec copies through pipes with a
// goroutine each, which costs the calling process more CPU per run (see
// BENCHMARKS.md). waitDelay bounds how long Wait waits for the plugin
// after its group was killed.
type groupExec struct {
	stderr    io.Writer
	waitDelay time.Duration
}

var _ Raw = (*groupExec)(nil)

// NewRaw returns the raw executor of this platform: on unix, one that
// runs each plugin in a process group of its own and kills the group when
// the context ends (see the package doc). The plugins' stderr is copied
// to stderr (nil: dropped).
func NewRaw(stderr io.Writer) Raw {
	return &groupExec{stderr: stderr, waitDelay: pluginWaitDelay}
}

func (e *groupExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	environ = injectTraceContext(ctx, environ)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, NotStarted(err, pluginPath)
		}
		stdout, stderr, err := e.run(ctx, pluginPath, stdinData, environ)
		var gerr *gateError
		if errors.As(err, &gerr) {
			return nil, gerr.err
		}
		if errors.Is(err, syscall.ETXTBSY) && attempt < textBusyRetries {
			bgwork.Sleep(ctx, textBusyDelay)
			continue
		}
		if out := outputOf(ctx); out != nil {
			out.Stdout, out.Stderr = stdout, stderr
		}
		var lerr *OutputLimitError
		if errors.As(err, &lerr) {
			return nil, lerr
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
// what it printed. Under a Gate that is not open, the plugin starts
// at once but gets its config only when the gate opens; when the gate
// opens with an error, or ctx ends first, the plugin is killed before it
// could read it, and run returns a *gateError.
func (e *groupExec) run(ctx context.Context, pluginPath string, stdinData []byte, environ []string) (stdout, stderr []byte, err error) {
	var files pluginFiles
	defer files.close()
	if err := files.open(); err != nil {
		return nil, nil, fmt.Errorf("plugin %s: %w", pluginPath, err)
	}
	cmd := exec.CommandContext(ctx, pluginPath)
	cmd.Env = environ
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files.stdinR, files.stdout, files.stderr
	cmd.ExtraFiles = inheritedOf(ctx)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = e.waitDelay
	start := cmd.Start
	if ns, low := netNSOf(ctx), lowPriority(ctx); ns != nil || low {
		start = func() error { return startOnOwnThread(cmd, ns, low) }
	}
	gate := GateOf(ctx)
	err = start()
	files.closeChildEnd() // the plugin has its own copy
	if err == nil {
		watch := watchOutput(cmd.Process, &files)
		if gate != nil {
			if gerr := gate.Wait(ctx); gerr != nil {
				_ = killGroup(cmd.Process)
				_ = cmd.Wait()
				watch.stop()
				return nil, nil, &gateError{err: gerr}
			}
		}
		err = errors.Join(files.feed(stdinData), cmd.Wait())
		watch.stop()
	} else if gate != nil {
		if gerr := gate.Wait(ctx); gerr != nil {
			return nil, nil, &gateError{err: gerr}
		}
	}
	nout, nerr := written(files.stdout), written(files.stderr)
	if lerr := files.overflow(pluginPath, nout, nerr); lerr != nil {
		return nil, nil, lerr
	}
	stdout, oerr := readCapture(files.stdout, nout)
	stderr, _ = readCapture(files.stderr, nerr) // stderr is only informational
	return stdout, stderr, errors.Join(err, oerr)
}

// pluginFiles are one plugin run's stdin pipe and its captured stdout and
// stderr.
type pluginFiles struct {
	stdinR, stdinW *os.File
	stdout, stderr *os.File
}

func (f *pluginFiles) open() (err error) {
	if f.stdinR, f.stdinW, err = os.Pipe(); err != nil {
		return err
	}
	if f.stdout, err = newCapture("stdout", MaxStdout); err != nil {
		return err
	}
	f.stderr, err = newCapture("stderr", MaxStderr)
	return err
}

// overflow returns the *OutputLimitError of the first stream that the
// plugin wrote past its cap, given how much it wrote to each, or nil.
func (f *pluginFiles) overflow(pluginPath string, nout, nerr int64) *OutputLimitError {
	file, stream, limit, n := f.stdout, "stdout", int64(MaxStdout), nout
	switch {
	case nout > MaxStdout:
	case nerr > MaxStderr:
		file, stream, limit, n = f.stderr, "stderr", MaxStderr, nerr
	default:
		return nil
	}
	head, _ := readCapture(file, min(n, QuoteLimit))
	return &OutputLimitError{Plugin: pluginPath, Stream: stream, Limit: limit, Head: head}
}

// closeChildEnd closes the read end of the stdin pipe, which the plugin
// inherited, so that a write fails once the plugin is gone.
func (f *pluginFiles) closeChildEnd() {
	if f.stdinR != nil {
		_ = f.stdinR.Close()
		f.stdinR = nil
	}
}

// feed writes data to the plugin's stdin and closes it. data up to
// stdinInline bytes fits in any pipe and is written before feed returns;
// more is written by a goroutine, as os/exec would, which ends when the
// plugin has read it all, or when close, called once the plugin has
// exited, closes the pipe under a write that nothing reads (a process the
// plugin left behind may hold its stdin). A plugin that exits without
// reading its stdin is no error.
func (f *pluginFiles) feed(data []byte) error {
	w := f.stdinW
	if len(data) > stdinInline {
		go func() {
			_, _ = w.Write(data)
			_ = w.Close()
		}()
		return nil
	}
	f.stdinW = nil
	_, err := w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

func (f *pluginFiles) close() {
	for _, file := range []*os.File{f.stdinR, f.stdinW, f.stdout, f.stderr} {
		if file != nil {
			_ = file.Close()
		}
	}
}

// stdinInline is the largest stdin that feed writes without a goroutine:
// a pipe holds at least one page, even where the kernel's per-user pipe
// limits shrink new pipes to that, and a write of at most PIPE_BUF bytes
// goes in whole.
const stdinInline = 4096

// newCapture returns an anonymous file in memory (memfd) to take a
// plugin's stdout or stderr, or, where there is none, an unlinked
// temporary file. Either goes away with its last descriptor. A file in
// memory cannot grow past limit and one page (see limitCapture): a write
// beyond fails, so that what a plugin prints takes at most that much
// memory, and a plugin that wrote more than limit bytes overflowed. The
// page is there because the kernel takes a write into such a file a page
// at a time: a write that starts at limit on a page boundary is refused
// whole unless its first page fits.
func newCapture(name string, limit int64) (*os.File, error) {
	if f, err := memFile("ocicni-plugin-" + name); err == nil {
		if err := limitCapture(f, limit+int64(os.Getpagesize())); err != nil {
			_ = f.Close()
			return nil, err
		}
		return f, nil
	}
	f, err := os.CreateTemp("", "ocicni-plugin-"+name+"-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	return f, nil
}

// written returns how many bytes were written to a capture: the offset
// of the file description that the plugin shares with f.
func written(f *os.File) int64 {
	n, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return n
}

// readCapture returns the first n bytes that a plugin wrote to f, n at
// most what it wrote: a process that the plugin left behind may still be
// writing, and what it wrote after those is not read.
func readCapture(f *os.File, n int64) ([]byte, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil // truncated meanwhile
	}
	return buf[:got], err
}

// outputPoll is how often a running plugin's captures are checked
// against their caps.
const outputPoll = 50 * time.Millisecond

// outputWatch kills a running plugin's process group once it has written
// past the cap of a capture. The file in memory already stops its
// writes there; the kill ends a plugin that would go on trying, or that
// writes to a temporary file, which has no such stop.
type outputWatch struct {
	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

func watchOutput(p *os.Process, files *pluginFiles) *outputWatch {
	w := &outputWatch{}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(outputPoll, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.done {
			return
		}
		if written(files.stdout) > MaxStdout || written(files.stderr) > MaxStderr {
			_ = killGroup(p)
			return
		}
		w.timer.Reset(outputPoll)
	})
	return w
}

// stop ends the watch once the plugin has been reaped, before its pid
// can be reused.
func (w *outputWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.timer.Stop()
}

// gateError carries the error of a Gate that opened with one to a run
// of a plugin that was killed waiting for it.
type gateError struct{ err error }

func (e *gateError) Error() string { return e.err.Error() }

// rawGatesStdin reports whether r holds back a plugin's stdin until its
// Gate opens: groupExec does.
func rawGatesStdin(r Raw) bool {
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
		emsg.Msg = fmt.Sprintf("netplugin failed: %s: %v", Quote(stderr, QuoteLimit), err)
	default:
		if perr := json.Unmarshal(stdout, &emsg); perr != nil {
			emsg.Msg = fmt.Sprintf("netplugin failed but error parsing its diagnostic message %s: %v", Quote(stdout, QuoteLimit), perr)
		} else {
			emsg.Msg, emsg.Details = cut(emsg.Msg, QuoteLimit), cut(emsg.Details, QuoteLimit)
		}
	}
	return &emsg
}

// cut returns s, or its start of at most n bytes, ending at a character,
// and a marker with the number of bytes left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:i], len(s)-i)
}

func (e *groupExec) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

// lowPriority reports whether ctx carries the mark of WithLowPriority.
func lowPriority(ctx context.Context) bool {
	low, _ := ctx.Value(lowPriorityKey{}).(bool)
	return low
}
