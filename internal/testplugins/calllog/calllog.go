package calllog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"
)

// Call is one plugin invocation, as recorded by a fake plugin.
type Call struct {
	// Verb is the CNI_COMMAND: ADD, DEL, CHECK, GC or STATUS.
	Verb string `json:"verb"`
	// ContainerID is CNI_CONTAINERID.
	ContainerID string `json:"containerId"`
	// IfName is CNI_IFNAME.
	IfName string `json:"ifName"`
	// NetNS is CNI_NETNS.
	NetNS string `json:"netns"`
	// Network is the "name" of the network configuration.
	Network string `json:"network"`
	// Args is the raw CNI_ARGS string.
	Args string `json:"args"`
	// Path is CNI_PATH.
	Path string `json:"path"`
	// Stdin is the whole network configuration the plugin received,
	// including runtimeConfig, prevResult and cni.dev/valid-attachments.
	Stdin map[string]any `json:"stdin"`
	// PID is the process id of the plugin.
	PID int `json:"pid"`
	// Nice is the plugin process's nice value (CPU priority) when it
	// handled the call; 0 where the recorder cannot tell.
	Nice int `json:"nice"`
	// Threads are the CPU priorities of each of the plugin process's
	// threads when it handled the call; empty where the recorder cannot
	// tell.
	Threads []Priority `json:"threads,omitempty"`
	// OwnNetNS names the network namespace the plugin process ran in (the
	// link /proc/self/ns/net points to, such as "net:[4026531840]"),
	// where it makes the host side of an attachment; "" where the
	// recorder cannot tell.
	OwnNetNS string `json:"ownNetns,omitempty"`
	// TraceParent is the TRACEPARENT the plugin was started with: the
	// W3C trace context of the span it runs under; "" without one.
	TraceParent string `json:"traceparent,omitempty"`
	// Time is when the plugin started handling the call.
	Time time.Time `json:"time"`
}

// Priority is a thread's CPU priority.
type Priority struct {
	Nice int `json:"nice"`
	// Policy is the scheduling policy, as Linux numbers it (SchedOther,
	// SchedIdle, ...).
	Policy int `json:"policy"`
}

// Scheduling policies, as Linux numbers them.
const (
	SchedOther = 0
	SchedIdle  = 5
)

// RuntimeConfig returns the "runtimeConfig" object of the configuration the
// plugin received, or nil if there was none.
func (c Call) RuntimeConfig() map[string]any {
	m, _ := c.Stdin["runtimeConfig"].(map[string]any)
	return m
}

// PrevResult returns the "prevResult" object of the configuration the
// plugin received, or nil if there was none.
func (c Call) PrevResult() map[string]any {
	m, _ := c.Stdin["prevResult"].(map[string]any)
	return m
}

// Append adds c to the log at path as one line, creating the file if
// needed. The line is written with a single write(2) on an O_APPEND file, so
// lines from concurrent processes do not interleave.
func Append(path string, c Call) error {
	line, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("calllog: encode call: %w", err)
	}
	line = append(line, '\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("calllog: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		_ = f.Close()
		return fmt.Errorf("calllog: append to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("calllog: close %s: %w", path, err)
	}
	return nil
}

// Read returns the calls logged at path, oldest first. A missing file is an
// empty log, not an error.
func Read(path string) ([]Call, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("calllog: %w", err)
	}
	var calls []Call
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("calllog: %s line %d: %w", path, n, err)
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("calllog: read %s: %w", path, err)
	}
	return calls, nil
}

// Filter returns the calls whose Verb is verb, in their original order.
func Filter(calls []Call, verb string) []Call {
	var out []Call
	for _, c := range calls {
		if c.Verb == verb {
			out = append(out, c)
		}
	}
	return out
}

// Span is one plugin call from its start to its end.
type Span struct {
	Call
	// End is when the call returned; zero when its end was not logged
	// (the plugin was killed, or still runs).
	End time.Time
}

// Spans pairs the calls of a start log with the ends of an end log (the
// recorder's "endLogFile"): each start with the first end after it of
// the same process, verb, container and interface. Starts come in their
// order; one without an end gets a zero End.
func Spans(starts, ends []Call) []Span {
	type key struct {
		pid              int
		verb, id, ifname string
	}
	byKey := map[key][]time.Time{}
	for _, e := range ends {
		k := key{e.PID, e.Verb, e.ContainerID, e.IfName}
		byKey[k] = append(byKey[k], e.Time)
	}
	for _, ts := range byKey {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	out := make([]Span, 0, len(starts))
	for _, s := range starts {
		k := key{s.PID, s.Verb, s.ContainerID, s.IfName}
		sp := Span{Call: s}
		for i, t := range byKey[k] {
			if !t.Before(s.Time) {
				sp.End = t
				byKey[k] = append(byKey[k][:i:i], byKey[k][i+1:]...)
				break
			}
		}
		out = append(out, sp)
	}
	return out
}

// Overlaps returns the pairs of spans on one container (ContainerID, any
// verb) that ran at once: the later one started before the earlier one
// ended, or the earlier one has no end. Each pair is earlier first.
func Overlaps(spans []Span) [][2]Span {
	byID := map[string][]Span{}
	for _, s := range spans {
		byID[s.ContainerID] = append(byID[s.ContainerID], s)
	}
	var out [][2]Span
	for _, ss := range byID {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Time.Before(ss[j].Time) })
		for i := range ss {
			for j := i + 1; j < len(ss); j++ {
				if ss[i].End.IsZero() || ss[j].Time.Before(ss[i].End) {
					out = append(out, [2]Span{ss[i], ss[j]})
				}
			}
		}
	}
	return out
}
