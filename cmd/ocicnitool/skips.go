package main

import (
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The commands that list the config files the library skipped (status,
// stats --conf) print each file's reason once: in that list. The
// library's warning about the skip and its "no default network" error,
// which both repeat the reason, are left out of what they print.

// heldLog is a logrus formatter that holds the log entries back until
// release. The library warns about a skipped config file while
// ocicni.New loads the conf dir, before the command can ask which files
// it skipped; release then writes what was held but those warnings.
type heldLog struct {
	inner logrus.Formatter // the formatter that writes the entries

	mu      sync.Mutex // guards holding and held; taken under logrus' own lock
	holding bool
	held    []*logrus.Entry
}

// holdLog makes log hold its entries back until release.
func holdLog(log *logrus.Logger) *heldLog {
	h := &heldLog{inner: log.Formatter, holding: true}
	log.SetFormatter(h)
	return h
}

// Format holds e back, or formats it once released.
func (h *heldLog) Format(e *logrus.Entry) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding {
		h.held = append(h.held, e)
		return nil, nil // logrus writes nothing
	}
	return h.inner.Format(e)
}

// release stops holding, and logs again, through the entries' logger,
// every held entry but the warnings about the files in skipped.
func (h *heldLog) release(skipped []*ocicni.ConfigError) {
	h.mu.Lock()
	held := h.held
	h.held, h.holding = nil, false
	h.mu.Unlock()
	for _, e := range held {
		if warnsOfSkip(e, skipped) {
			continue
		}
		logrus.NewEntry(e.Logger).WithTime(e.Time).WithFields(e.Data).Log(e.Level, e.Message)
	}
}

// warnsOfSkip reports whether e is the library's warning about one of
// the skipped files: a warning with an error whose file and network
// fields are those of the skip.
func warnsOfSkip(e *logrus.Entry, skipped []*ocicni.ConfigError) bool {
	if e.Level != logrus.WarnLevel || e.Data[logrus.ErrorKey] == nil {
		return false
	}
	file, _ := e.Data["file"].(string)
	network, _ := e.Data["network"].(string)
	for _, sk := range skipped {
		if sk.File == file && sk.Network == network {
			return true
		}
	}
	return false
}

// listedError is an error whose message leaves out what the command's
// output lists already; it unwraps to the whole error.
type listedError struct {
	msg string
	err error
}

func (e *listedError) Error() string { return e.msg }
func (e *listedError) Unwrap() error { return e.err }

// noDefaultNetwork is the error of a conf dir that gives no default
// network, for the commands that list the skipped config files: it
// matches ocicni.ErrNoDefaultNetwork (exit code 2, not found) and, when
// cause is the library's error, unwraps to it, but names the skipped
// files only by their number. cause may be nil.
func noDefaultNetwork(cause error, confDir string, skipped int) error {
	if cause == nil {
		cause = ocicni.ErrNoDefaultNetwork
	}
	msg := fmt.Sprintf("%v: no valid CNI configuration in %s", ocicni.ErrNoDefaultNetwork, confDir)
	switch {
	case skipped == 1:
		msg += " (1 config file skipped, listed with the reason)"
	case skipped > 1:
		msg += fmt.Sprintf(" (%d config files skipped, listed with the reason)", skipped)
	}
	return &listedError{msg: msg, err: cause}
}
