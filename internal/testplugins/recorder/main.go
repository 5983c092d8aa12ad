package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
)

// behaviour is what the plugin does for one verb. See the package doc.
type behaviour struct {
	Result       json.RawMessage `json:"result,omitempty"`
	EmptyResult  bool            `json:"emptyResult,omitempty"`
	ErrorCode    uint            `json:"errorCode,omitempty"`
	ErrorMsg     string          `json:"errorMsg,omitempty"`
	Crash        bool            `json:"crash,omitempty"`
	SleepMs      int             `json:"sleepMs,omitempty"`
	OnlyIfExists string          `json:"onlyIfExists,omitempty"`
	ChildPidFile string          `json:"childPidFile,omitempty"`
	EnteredFile  string          `json:"enteredFile,omitempty"`
	WaitForFile  string          `json:"waitForFile,omitempty"`
	WaitMaxMs    int             `json:"waitMaxMs,omitempty"`
}

// netConf is the recorder's network configuration.
type netConf struct {
	types.PluginConf
	LogFile string     `json:"logFile,omitempty"`
	EndLog  string     `json:"endLogFile,omitempty"`
	Add     *behaviour `json:"add,omitempty"`
	Del     *behaviour `json:"del,omitempty"`
	Check   *behaviour `json:"check,omitempty"`
	GC      *behaviour `json:"gc,omitempty"`
	Status  *behaviour `json:"status,omitempty"`
}

// crashOutput is what a crashing plugin prints instead of JSON.
const crashOutput = "recorder: simulated crash: this is not JSON {{{\n"

func main() {
	if os.Getenv(childEnv) != "" {
		childMain()
		return
	}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return run("ADD", a) },
		Del:    func(a *skel.CmdArgs) error { return run("DEL", a) },
		Check:  func(a *skel.CmdArgs) error { return run("CHECK", a) },
		GC:     func(a *skel.CmdArgs) error { return run("GC", a) },
		Status: func(a *skel.CmdArgs) error { return run("STATUS", a) },
	}, version.All, "recorder test plugin")
}

// run logs the call, applies the verb's behaviour and, for ADD, prints the
// result.
func run(verb string, args *skel.CmdArgs) error {
	conf := &netConf{}
	if err := json.Unmarshal(args.StdinData, conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "recorder: parse netconf", err.Error())
	}
	if err := logCall(verb, conf, args); err != nil {
		return types.NewError(types.ErrIOFailure, "recorder: write call log", err.Error())
	}
	if conf.EndLog != "" {
		defer logEnd(verb, conf, args)
	}

	b := conf.behaviourFor(verb)
	if err := b.runHooks(verb, args); err != nil {
		return err
	}
	if err := b.injectFault(verb); err != nil {
		return err
	}
	if verb != "ADD" {
		return nil
	}
	return add(conf, b)
}

// runHooks does the steps a test synchronises on, in order: start a
// child that outlives the plugin, say that the plugin has entered, and
// wait until the test lets it go on.
func (b behaviour) runHooks(verb string, args *skel.CmdArgs) error {
	if b.ChildPidFile != "" {
		if err := startChild(b.ChildPidFile); err != nil {
			return types.NewError(types.ErrIOFailure, "recorder: start child", err.Error())
		}
	}
	if b.EnteredFile != "" {
		if err := markEntered(b.EnteredFile, verb, args); err != nil {
			return types.NewError(types.ErrIOFailure, "recorder: write enteredFile", err.Error())
		}
	}
	if b.WaitForFile != "" {
		if err := waitForFile(b.WaitForFile, b.waitMax()); err != nil {
			return types.NewError(types.ErrInternal, "recorder: waitForFile", err.Error())
		}
	}
	return nil
}

// injectFault applies the sleep, crash and error of b while its fault is
// active. The fault is checked again after the sleep, so that a test can
// lift it while the plugin sleeps. A crash exits the process; nil means
// the plugin goes on normally.
func (b behaviour) injectFault(verb string) error {
	faulty, err := b.faultActive()
	if err != nil {
		return types.NewError(types.ErrIOFailure, "recorder: check onlyIfExists", err.Error())
	}
	if faulty && b.SleepMs > 0 {
		time.Sleep(time.Duration(b.SleepMs) * time.Millisecond)
		if faulty, err = b.faultActive(); err != nil {
			return types.NewError(types.ErrIOFailure, "recorder: check onlyIfExists", err.Error())
		}
	}
	if faulty && b.Crash {
		_, _ = os.Stdout.WriteString(crashOutput)
		os.Exit(2)
	}
	if faulty && (b.ErrorCode != 0 || b.ErrorMsg != "") {
		return injectedError(verb, b)
	}
	return nil
}

// behaviourFor returns the behaviour configured for verb, or the zero
// behaviour.
func (c *netConf) behaviourFor(verb string) behaviour {
	var b *behaviour
	switch verb {
	case "ADD":
		b = c.Add
	case "DEL":
		b = c.Del
	case "CHECK":
		b = c.Check
	case "GC":
		b = c.GC
	case "STATUS":
		b = c.Status
	}
	if b == nil {
		return behaviour{}
	}
	return *b
}

// faultActive reports whether the sleep, error or crash of b applies now.
func (b behaviour) faultActive() (bool, error) {
	if b.OnlyIfExists == "" {
		return true, nil
	}
	_, err := os.Stat(b.OnlyIfExists)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// injectedError builds the configured CNI error.
func injectedError(verb string, b behaviour) error {
	code, msg := b.ErrorCode, b.ErrorMsg
	if code == 0 {
		code = types.ErrInternal
	}
	if msg == "" {
		msg = fmt.Sprintf("recorder: injected %s failure", verb)
	}
	return types.NewError(code, msg, "")
}

// add prints the ADD result: the configured raw result, an empty result, or
// prevResult passed through.
func add(conf *netConf, b behaviour) error {
	if len(b.Result) > 0 {
		out := []byte(b.Result)
		var text string
		if json.Unmarshal(b.Result, &text) == nil {
			out = []byte(text) // a JSON string is printed unquoted
		}
		if _, err := os.Stdout.Write(out); err != nil {
			return types.NewError(types.ErrIOFailure, "recorder: write result", err.Error())
		}
		return nil
	}

	res := emptyResult(conf.CNIVersion)
	if !b.EmptyResult && conf.RawPrevResult != nil {
		raw, err := json.Marshal(conf.RawPrevResult)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, "recorder: encode prevResult", err.Error())
		}
		// Parse by the prevResult's own version, so a mismatched one is
		// converted rather than rejected.
		if res, err = create.CreateFromBytes(raw); err != nil {
			return types.NewError(types.ErrDecodingFailure, "recorder: parse prevResult", err.Error())
		}
	}
	// PrintResult converts to the configuration's version.
	if err := types.PrintResult(res, conf.CNIVersion); err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "recorder: print result", err.Error())
	}
	return nil
}

// emptyResult returns a result with no interfaces, IPs or routes that
// prints as cniVersion. Results before 0.3.0 are built directly, because a
// newer result without IPs cannot be converted down to them.
func emptyResult(cniVersion string) types.Result {
	if old, err := version.GreaterThan("0.3.0", cniVersion); err == nil && old {
		return &types020.Result{CNIVersion: cniVersion}
	}
	return &current.Result{CNIVersion: current.ImplementedSpecVersion}
}

// logCall appends this call to the configured log, if any.
func logCall(verb string, conf *netConf, args *skel.CmdArgs) error {
	if conf.LogFile == "" {
		return nil
	}
	var stdin map[string]any
	if err := json.Unmarshal(args.StdinData, &stdin); err != nil {
		return err
	}
	return calllog.Append(conf.LogFile, calllog.Call{
		Verb:        verb,
		ContainerID: args.ContainerID,
		IfName:      args.IfName,
		NetNS:       args.Netns,
		Network:     conf.Name,
		Args:        args.Args,
		Path:        args.Path,
		Stdin:       stdin,
		PID:         os.Getpid(),
		Nice:        niceValue(),
		Threads:     threadPriorities(),
		OwnNetNS:    ownNetNS(),
		TraceParent: os.Getenv("TRACEPARENT"),
		Time:        time.Now(),
	})
}

// logEnd appends the end of the call to the end log: the call's verb,
// container, interface, network and PID, at the time it ends. A plugin
// killed before it ends logs none.
func logEnd(verb string, conf *netConf, args *skel.CmdArgs) {
	// An end that cannot be logged reads as a call that never ended,
	// which a test takes as overlapping every later one: it fails.
	_ = calllog.Append(conf.EndLog, calllog.Call{
		Verb: verb, ContainerID: args.ContainerID, IfName: args.IfName, Network: conf.Name,
		PID: os.Getpid(), Time: time.Now(),
	})
}

// ownNetNS names the plugin process's network namespace, or "".
func ownNetNS() string {
	name, _ := os.Readlink("/proc/self/ns/net")
	return name
}
