package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
)

// defaultWaitMax bounds "waitForFile" when "waitMaxMs" is not set: far
// longer than any test waits on purpose, short enough that a test that
// never releases the plugin still ends.
const defaultWaitMax = 60 * time.Second

// waitPoll is how often "waitForFile" looks for its file.
const waitPoll = 5 * time.Millisecond

// waitMax returns how long "waitForFile" waits at most.
func (b behaviour) waitMax() time.Duration {
	if b.WaitMaxMs > 0 {
		return time.Duration(b.WaitMaxMs) * time.Millisecond
	}
	return defaultWaitMax
}

// markEntered appends one line, "VERB containerID ifname", to path,
// creating it if needed. A single short O_APPEND write, so concurrent
// plugins never interleave their lines and a reader counts whole calls.
func markEntered(path, verb string, args *skel.CmdArgs) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %s %s\n", verb, args.ContainerID, args.IfName); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	return f.Close()
}

// waitForFile returns once path exists, or an error after limit.
func waitForFile(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, limit)
		}
		time.Sleep(waitPoll)
	}
}
