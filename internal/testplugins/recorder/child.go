package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// childEnv marks a process started for "childPidFile": the recorder binary
// run with it set only sleeps for childLifetime.
const childEnv = "OCICNI_RECORDER_CHILD"

// childLifetime is how long a child sleeps: far longer than any test, so
// that a child still running at the end of a test was left behind.
const childLifetime = time.Hour

// childMain is the whole life of a child process.
func childMain() {
	time.Sleep(childLifetime)
}

// startChild starts the recorder binary again as a child that sleeps. The
// child inherits the plugin's stdout and stderr, as a helper started
// carelessly by a real plugin would, so whoever reads the plugin's output
// sees it open until the child ends. startChild does not wait for it: when
// the plugin exits, the child lives on as an orphan. The child's pid is
// written to pidFile, atomically, so a reader never sees a partial file.
func startChild(pidFile string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := writePidFile(pidFile, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill() // a child nobody knows of must not outlive us
		return err
	}
	return cmd.Process.Release()
}

// writePidFile writes pid to path through a rename.
func writePidFile(path string, pid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".childpid-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once the rename succeeded
	if _, err := tmp.WriteString(strconv.Itoa(pid)); err != nil {
		_ = tmp.Close() // the write error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
