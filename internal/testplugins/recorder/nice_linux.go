package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// niceValue returns this process's nice value. Linux's getpriority
// returns 20 minus it.
func niceValue() int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}

// threadPriorities returns the nice value and scheduling policy of each
// of this process's threads, from /proc/self/task/*/stat (fields 19 and
// 41, counted from 1), or nil when they cannot be read.
func threadPriorities() []calllog.Priority {
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		return nil
	}
	var out []calllog.Priority
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended meanwhile
		}
		// The fields after the command name, which may hold spaces and
		// ends at the last ')', start with field 3.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			return nil
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 41-2 {
			return nil
		}
		nice, nerr := strconv.Atoi(f[19-3])
		policy, perr := strconv.Atoi(f[41-3])
		if nerr != nil || perr != nil {
			return nil
		}
		out = append(out, calllog.Priority{Nice: nice, Policy: policy})
	}
	return out
}
