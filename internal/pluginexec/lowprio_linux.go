package pluginexec

import (
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
func StartLowPriority(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine (the main thread is parked instead)
		lowerThread()
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
