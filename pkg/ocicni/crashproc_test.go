package ocicni

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// helper is a running TestCrashHelper process, in a session of its own so
// that the plugins it starts can be found after it dies.
type helper struct {
	cmd    *exec.Cmd
	out    *helperOutput
	errBuf *syncBuffer
	exited chan struct{}
}

func startHelper(t *testing.T, job crashJob) *helper {
	t.Helper()
	raw, err := json.Marshal(job)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+string(raw), testenv.PluginDirEnv+"="+pluginDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h := &helper{
		cmd: cmd, out: &helperOutput{ready: make(chan struct{}), done: make(chan struct{}), paused: make(chan struct{})},
		errBuf: &syncBuffer{}, exited: make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = h.out, h.errBuf
	// Orphaned plugins hold the helper's stderr: stop waiting for it
	// once they are gone, or after this delay.
	cmd.WaitDelay = crashWait
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait() // killed: the error says so
		close(h.exited)
	}()
	t.Cleanup(func() {
		killSession(t, cmd.Process.Pid)
		<-h.exited
	})
	return h
}

// waitFor waits until the helper is ready and cond (when not nil) holds,
// or the helper finished or died. It fails the test when none of this
// happens in time.
func (h *helper) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(crashWait)
	select {
	case <-h.out.ready:
	case <-h.exited:
		require.FailNow(t, "the helper exited before it was ready", h.stderr())
	case <-deadline:
		require.FailNow(t, "the helper did not get ready", h.stderr())
	}
	for cond != nil && !cond() && !h.finished() {
		select {
		case <-h.exited:
			require.FailNow(t, "the helper exited before it was killed", h.stderr())
		case <-deadline:
			require.FailNow(t, "the kill point was never reached", h.stderr())
		case <-time.After(time.Millisecond): // poll the call log
		}
	}
}

// waitPaused waits until the helper stopped its config save (see
// crashJob.PauseInConfigSave), and returns the save's temporary file.
func (h *helper) waitPaused(t *testing.T) string {
	t.Helper()
	select {
	case <-h.out.paused:
	case <-h.exited:
		require.FailNow(t, "the helper exited before its config save", h.stderr())
	case <-time.After(crashWait):
		require.FailNow(t, "the helper's config save never started", h.stderr())
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	return h.out.temp
}

// waitDone waits until the helper finished its job, and returns the
// job's error as it printed it ("<nil>" for none).
func (h *helper) waitDone(t *testing.T) string {
	t.Helper()
	select {
	case <-h.out.done:
	case <-h.exited:
		require.FailNow(t, "the helper exited before it finished", h.stderr())
	case <-time.After(crashWait):
		require.FailNow(t, "the helper did not finish", h.stderr())
	}
	return h.out.result()
}

func (h *helper) finished() bool {
	select {
	case <-h.out.done:
		return true
	default:
		return false
	}
}

func (h *helper) result() string {
	if !h.finished() {
		return "no result"
	}
	return "result: " + h.out.result()
}

func (h *helper) stderr() string { return h.errBuf.String() }

// kill sends SIGKILL to the helper alone, so that the plugins it started
// run to their end, or to every process of its session, plugins
// included. Either way it returns once no process of the session is left,
// with the number of plugin processes that were running at the kill.
func (h *helper) kill(t *testing.T, session bool) int {
	t.Helper()
	pid := h.cmd.Process.Pid
	plugins := len(slices.DeleteFunc(sessionMembers(t, pid), func(p int) bool { return p == pid }))
	if session {
		killSession(t, pid)
	} else {
		require.NoError(t, h.cmd.Process.Kill())
	}
	deadline := time.Now().Add(crashWait)
	for len(sessionMembers(t, pid)) > 0 {
		require.True(t, time.Now().Before(deadline), "plugins of the killed helper still run: %v", sessionMembers(t, pid))
		time.Sleep(5 * time.Millisecond) // poll /proc
	}
	<-h.exited
	return plugins
}

// loggedCalls counts the complete lines of the recorder's call log for
// verb and container id. A line being appended is not counted yet.
func loggedCalls(t *testing.T, logFile, verb, id string) int {
	t.Helper()
	data, err := os.ReadFile(logFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for line := range bytes.Lines(data) {
		var c calllog.Call
		if bytes.HasSuffix(line, []byte("\n")) && json.Unmarshal(line, &c) == nil && c.Verb == verb && c.ContainerID == id {
			n++
		}
	}
	return n
}

// killSession sends SIGKILL to every process of session sid until none is
// left (a plugin may start another one meanwhile).
func killSession(t *testing.T, sid int) {
	t.Helper()
	deadline := time.Now().Add(crashWait)
	for pids := sessionMembers(t, sid); len(pids) > 0; pids = sessionMembers(t, sid) {
		require.True(t, time.Now().Before(deadline), "processes of session %d survive SIGKILL: %v", sid, pids)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // it may have ended since the scan
		}
		time.Sleep(time.Millisecond) // let the kernel deliver
	}
}

// sessionMembers lists the processes of session sid that have not ended
// (see [testenv.ProcessGone]: a process has ended only once every thread
// of it has, and with them its hold on the sandbox's lock file).
func sessionMembers(t *testing.T, sid int) []int {
	t.Helper()
	des, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, d := range des {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		require.NoError(t, err)
		// "pid (comm) state ppid pgrp session ...": comm may hold ")".
		i := bytes.LastIndexByte(b, ')')
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 4 {
			continue
		}
		if s, _ := strconv.Atoi(fields[3]); s == sid && !testenv.ProcessGone(t, pid) {
			out = append(out, pid)
		}
	}
	return out
}

// helperOutput watches the helper's stdout for its ready and done lines.
type helperOutput struct {
	mu                  sync.Mutex // guards buf, res, temp and the closing of the channels
	buf                 bytes.Buffer
	res                 string
	temp                string // the temporary file of the paused config save
	ready, done, paused chan struct{}
}

func (o *helperOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(o.buf.Bytes()))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == helperReady && !isClosed(o.ready):
			close(o.ready)
		case strings.HasPrefix(line, helperDone) && !isClosed(o.done):
			o.res = strings.TrimPrefix(line, helperDone)
			close(o.done)
		case strings.HasPrefix(line, helperPaused) && !isClosed(o.paused):
			o.temp = strings.TrimPrefix(line, helperPaused)
			close(o.paused)
		}
	}
	return len(p), nil
}

func (o *helperOutput) result() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.res
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// syncBuffer is a bytes.Buffer that the exec copier and the test may use
// at once.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
