//go:build unix && !linux

package pluginexec

import (
	"os"
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

// startOnOwnThread starts cmd, at low priority when low. Outside Linux
// there are no network namespaces, and ns is nil.
func startOnOwnThread(cmd *exec.Cmd, _ *os.File, low bool) error {
	if low {
		return StartLowPriority(cmd)
	}
	return cmd.Start()
}
