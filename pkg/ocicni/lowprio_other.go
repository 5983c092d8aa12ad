//go:build unix && !linux

package ocicni

import (
	"os/exec"
	"syscall"
)

// startBackground starts cmd, a background DEL's plugin, and lowers its
// process to nice backgroundNice, best effort: a plugin that already
// exited has nothing to lower. Outside Linux a priority is the process's,
// so the threads it started meanwhile are lowered too.
func startBackground(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, backgroundNice)
	return nil
}
