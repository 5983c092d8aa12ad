package main

import "syscall"

// niceValue returns this process's nice value. Linux's getpriority
// returns 20 minus it.
func niceValue() int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}
