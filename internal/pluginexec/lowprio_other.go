//go:build unix && !linux

package pluginexec

import (
	"os/exec"
	"syscall"
)

// StartLowPriority starts cmd and lowers its process to nice [LowNice],
// best effort: a plugin that already exited has nothing to lower. Outside
// Linux a priority is the process's, so the threads it started meanwhile
// are lowered too.
func StartLowPriority(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, LowNice)
	return nil
}
