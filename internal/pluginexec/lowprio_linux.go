package pluginexec

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// StartLowPriority starts cmd so that every thread of it runs at the
// lowest CPU priority from its first instruction: SCHED_IDLE, which any
// normal thread that wakes up preempts at once, and nice [LowNice],
// should anything reset the policy.
//
// Linux sets priorities per thread, and a thread inherits its creator's.
// Lowering the plugin's pid after it started would reach only its main
// thread, and only once it had loaded: a Go plugin's runtime has started
// threads of its own by then. So cmd is started from an OS thread lowered
// for that purpose, whose fork the plugin inherits. That thread is never
// handed back: it cannot raise its priority again without CAP_SYS_NICE, so
// it ends with the goroutine. When the thread cannot be lowered, the
// plugin starts at the normal priority. cmd must not set
// SysProcAttr.Pdeathsig: Linux sends it when the thread that started the
// process ends, which here is at once.
func StartLowPriority(cmd *exec.Cmd) error { return startOnOwnThread(cmd, nil, true) }

// startOnOwnThread starts cmd from an OS thread of its own that first
// enters the network namespace ns (nil: stays in the namespace it has)
// and, when low, lowers itself (see [StartLowPriority]); the plugin
// inherits both. A thread that entered ns goes back to its namespace
// afterwards and is handed back, unless it was lowered or cannot go back:
// then it ends with the goroutine.
func startOnOwnThread(cmd *exec.Cmd, ns *os.File, low bool) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once the thread is as it was
		if ns != nil {
			back, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				errc <- fmt.Errorf("pluginexec: opening the thread's network namespace: %w", err)
				return
			}
			defer back.Close()
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				errc <- fmt.Errorf("pluginexec: entering the manager's network namespace: %w", err)
				return
			}
			if !low {
				defer func() {
					if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
						runtime.UnlockOSThread()
					}
				}()
			}
		}
		if low {
			lowerThread()
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// lowerThread lowers the calling OS thread to SCHED_IDLE and nice
// LowNice, best effort. The nice value comes second: entering
// SCHED_IDLE resets it to 0 on recent kernels. (Before 3.14 there is no
// sched_setattr, and nice alone applies.)
func lowerThread() {
	attr := unix.SchedAttr{Policy: unix.SCHED_IDLE}
	attr.Size = uint32(unsafe.Sizeof(attr))
	_ = unix.SchedSetAttr(0, &attr, 0)
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, LowNice)
}
