package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ReadPidFile returns the pid written to path, or 0 while path does not
// exist yet or is still empty: a shell's `echo $$ > file` creates the
// file before it writes to it, and a loaded machine can run the reader
// in between. It fails the test if the file holds something else.
func ReadPidFile(tb testing.TB, path string) int {
	tb.Helper()
	pid, err := readPidFile(path)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return pid
}

// readPidFile is [ReadPidFile] with the failure returned, for callers
// that poll from another goroutine.
func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil // created, not written yet
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%w: %s holds %q", errBadPidFile, path, b)
	}
	return pid, nil
}

var errBadPidFile = errors.New("testenv: bad pid file")

// ProcessGone reports whether process pid has ended: /proc has no entry
// for it, or it is a zombie that its parent has not reaped yet (an
// orphan's new parent may never reap it) and none of its threads is
// still exiting. A thread group's leader shows as a zombie as soon as it
// exits, while its other threads may still be exiting with the process's
// open files, and so its file locks. It reads /proc, so it works on Linux
// only.
func ProcessGone(tb testing.TB, pid int) bool {
	tb.Helper()
	gone, err := processGone(pid)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return gone
}

// processGone is [ProcessGone] with the failure returned, for callers
// that poll from another goroutine.
func processGone(pid int) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	ended, err := statEnded(dir + "/stat")
	if err != nil || !ended {
		return ended, err
	}
	tids, err := os.ReadDir(dir + "/task")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, tid := range tids {
		if ended, err := statEnded(dir + "/task/" + tid.Name() + "/stat"); err != nil || !ended {
			return ended, err
		}
	}
	return true, nil
}

// statEnded reports whether the process or thread of a /proc stat file
// has ended: the file is gone, or its state is zombie or dead.
func statEnded(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold ")": "pid (comm) S ppid ...".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("%w: %s: %q", errBadProcStat, path, b)
	}
	state := b[i+2]
	return state == 'Z' || state == 'X', nil
}

var errBadProcStat = errors.New("testenv: cannot parse")

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
