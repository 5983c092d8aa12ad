package testenv

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ReadPidFile returns the pid written to path, or 0 while path does not
// exist yet. It fails the test if the file holds something else.
func ReadPidFile(tb testing.TB, path string) int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		tb.Fatalf("testenv: pid file %s holds %q", path, b)
	}
	return pid
}

// ProcessGone reports whether process pid has ended: /proc has no entry
// for it, or it is a zombie that its parent has not reaped yet (an
// orphan's new parent may never reap it). It reads /proc, so it works on
// Linux only.
func ProcessGone(tb testing.TB, pid int) bool {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return true
	}
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold ")": "pid (comm) S ppid ...".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		tb.Fatalf("testenv: cannot parse /proc/%d/stat: %q", pid, b)
	}
	state := b[i+2]
	return state == 'Z' || state == 'X'
}

// KillOnCleanup makes sure process pid does not outlive the test: when the
// test ends it is sent SIGKILL unless it has already ended. Tests register
// it for processes that are left behind only when they fail.
func KillOnCleanup(tb testing.TB, pid int) {
	tb.Helper()
	tb.Cleanup(func() {
		if !ProcessGone(tb, pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // it may have ended since the check
		}
	})
}
