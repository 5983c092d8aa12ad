package ocicnitest

import (
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The fake itself lives in package fakecni, which imports nothing of
// ocicni so that the engine's own tests use it too; these are its names
// here.
type (
	// FakeExec plays every CNI plugin without running a process or
	// touching the kernel: an invoke.Exec for [ocicni.WithExec] and an
	// [ocicni.NetNSOps] for [ocicni.WithNetNSOps]; [Env.Options] passes
	// it as both. See the package doc, and [fakecni.Exec] for its methods.
	FakeExec = fakecni.Exec
	// Call is one recorded plugin call; see [fakecni.Call].
	Call = fakecni.Call
	// Match selects calls by verb, network and plugin type; see
	// [fakecni.Match].
	Match = fakecni.Match
	// Gate holds the calls a Match selects until released; see
	// [fakecni.Gate].
	Gate = fakecni.Gate
	// GateOption configures a Gate; see [IgnoreContext].
	GateOption = fakecni.GateOption
	// FindMode is how FakeExec.FindInPath finds plugins; see
	// [fakecni.FindMode].
	FindMode = fakecni.FindMode
)

// How FakeExec.FindInPath finds plugins; see [fakecni.FindAny] and its
// siblings.
const (
	FindAny       = fakecni.FindAny
	FindOnDisk    = fakecni.FindOnDisk
	FindUnchecked = fakecni.FindUnchecked
)

var _ ocicni.NetNSOps = (*FakeExec)(nil)

// DefaultSubnet is the subnet from which the default ADD result of a
// FakeExec made by [NewFakeExec] takes its IPs, for networks without a
// [fakecni.Exec.Subnet] of their own. NewFakeExec reads it.
var DefaultSubnet = fakecni.DefaultSubnet

// GateTimeout bounds [fakecni.Gate.WaitEntered] for the gates of a
// FakeExec made by [NewFakeExec]: how long the code under test may take
// to reach a gated call on a loaded machine. NewFakeExec reads it.
var GateTimeout = fakecni.GateTimeout

// NewFakeExec returns a FakeExec that finds every plugin type, answers
// VERSION with every spec version, and succeeds every verb, with
// [DefaultSubnet] and [GateTimeout].
func NewFakeExec() *FakeExec {
	return fakecni.New(fakecni.WithDefaultSubnet(DefaultSubnet), fakecni.WithGateTimeout(GateTimeout))
}

// IgnoreContext makes a gate hold its calls even after their context
// ends, as a plugin that ignores cancellation would; see
// [fakecni.IgnoreContext].
func IgnoreContext() GateOption { return fakecni.IgnoreContext() }

// NewNetNS creates an empty regular file dir/name to stand in for a pod's
// netns path, and returns its absolute path; see [fakecni.NewNetNS].
func NewNetNS(dir, name string) (string, error) { return fakecni.NewNetNS(dir, name) }
