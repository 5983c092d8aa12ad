//go:build !linux

package main

import "github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"

// niceValue is not read off Linux.
func niceValue() int { return 0 }

// threadPriorities are not read off Linux.
func threadPriorities() []calllog.Priority { return nil }
