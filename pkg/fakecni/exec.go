package fakecni

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// DefaultSubnet is the subnet from which the default ADD result takes its
// IP, for networks without an [Exec.Subnet] of their own, unless
// [WithDefaultSubnet] says otherwise.
var DefaultSubnet = netip.MustParsePrefix("10.88.0.0/16")

// Exec plays every CNI plugin without running a process or touching
// the kernel. It is an invoke.Exec for libcni (and for ocicni.WithExec)
// and an ocicni.NetNSOps (for ocicni.WithNetNSOps). Answers are scripted per network and verb ([Exec.Result],
// [Exec.Fail], [Exec.Hang]); without a script every verb succeeds
// (see the package doc for the default answers). A plugin type's verb can
// be failed for every network ([Exec.FailPlugin]), and calls can be
// held at a [Gate] until the test releases them ([Exec.Gate]). Every
// call is recorded ([Exec.Calls], [Exec.Count]), and every plugin
// lookup counted ([Exec.Lookups]).
//
// An Exec is safe for concurrent use. The zero value is not usable;
// call [New].
type Exec struct {
	mu       sync.Mutex          // guards every field below; never held while a call hangs
	rules    map[ruleKey]*rule   // scripted answers
	only     map[string]bool     // plugin types FindInPath finds; nil means all
	versions map[string][]string // plugin type -> VERSION's supportedVersions
	subnets  map[string]*pool    // network -> its own pool
	shared   *pool               // pool of networks without one
	calls    []Call
	gates    []*Gate           // in the order they were made
	failing  map[ruleKey]error // (plugin type, verb) -> error; see FailPlugin
	find     FindMode
	lookups  map[string]int // plugin -> FindInPath calls
	loErr    error
	loUp     map[string]bool      // netns paths whose lo is up
	live     map[liveKey]liveAddr // interfaces made by successful ADDs

	gateTimeout time.Duration // set by New; read only
}

type ruleKey struct{ network, verb string }

// rule is the script of one (network, verb). result and err exclude each
// other; hang holds calls until it is closed or their context ends.
type rule struct {
	result    []byte
	hasResult bool
	err       error
	hang      chan struct{}
}

var _ invoke.Exec = (*Exec)(nil)

// Option configures an [Exec] made by [New].
type Option func(*Exec)

// WithDefaultSubnet makes the default ADD result of networks without a
// [Exec.Subnet] of their own take its IPs from subnet instead of
// [DefaultSubnet].
func WithDefaultSubnet(subnet netip.Prefix) Option {
	return func(f *Exec) { f.shared = newPool(subnet) }
}

// WithGateTimeout bounds [Gate.WaitEntered] for the gates of the Exec by
// d instead of [GateTimeout].
func WithGateTimeout(d time.Duration) Option {
	return func(f *Exec) { f.gateTimeout = d }
}

// New returns an Exec that finds every plugin type, answers VERSION with
// every spec version, and succeeds every verb.
func New(opts ...Option) *Exec {
	f := &Exec{
		rules:       map[ruleKey]*rule{},
		versions:    map[string][]string{},
		failing:     map[ruleKey]error{},
		lookups:     map[string]int{},
		subnets:     map[string]*pool{},
		shared:      newPool(DefaultSubnet),
		loUp:        map[string]bool{},
		live:        map[liveKey]liveAddr{},
		gateTimeout: GateTimeout,
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

func (f *Exec) ruleFor(network, verb string) *rule {
	k := ruleKey{network, verb}
	r := f.rules[k]
	if r == nil {
		r = &rule{}
		f.rules[k] = r
	}
	return r
}

// Result makes every plugin of network answer verb with result, a JSON
// document written as a plugin would write it to stdout, until
// [Exec.Clear] or another script for the pair. For ADD it becomes
// the network's result; libcni ignores what the other verbs print.
func (f *Exec) Result(network, verb, result string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.ruleFor(network, verb)
	r.result, r.hasResult, r.err = []byte(result), true, nil
}

// Fail makes every plugin of network fail verb with err until
// [Exec.Clear] or another script for the pair. A *types.Error is
// what a plugin's error on stdout becomes with the real executor, so the
// manager's errors reach it with errors.As; any other error stands for
// an executor failure (a binary that cannot be started, say). A nil err
// restores the default answer.
func (f *Exec) Fail(network, verb string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.ruleFor(network, verb)
	r.result, r.hasResult, r.err = nil, false, err
}

// Hang makes the plugins of network block in verb until the call's
// context ends, when the call fails with the context's error, as a
// plugin killed by the default executor would. The returned release ends
// the hang: held and later calls then answer as scripted otherwise. It
// may be called more than once.
func (f *Exec) Hang(network, verb string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.ruleFor(network, verb)
	ch := make(chan struct{})
	r.hang = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if r.hang == ch {
				r.hang = nil
			}
			close(ch)
		})
	}
}

// FailPlugin makes every call of verb to plugin type typ fail with err,
// whatever the network, until it is called again with a nil err. It
// takes precedence over the network's script. Use it for VERSION, whose
// calls carry no network: FailPlugin("bridge", "VERSION", err) plays a
// bridge binary that cannot run, and the manager skips the networks that
// use it.
func (f *Exec) FailPlugin(typ, verb string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.failing, ruleKey{typ, verb})
		return
	}
	f.failing[ruleKey{typ, verb}] = err
}

// Clear removes the scripts of (network, verb), so that it gets the
// default answer. Calls already hanging keep hanging until released.
func (f *Exec) Clear(network, verb string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, ruleKey{network, verb})
}

// Subnet gives network a pool of its own for the default ADD result: IPs
// are handed out in order from the third address on (the second is the
// gateway). It panics on an invalid prefix.
func (f *Exec) Subnet(network string, subnet netip.Prefix) {
	if !subnet.IsValid() {
		panic(fmt.Sprintf("fakecni: invalid subnet %v for network %q", subnet, network))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subnets[network] = newPool(subnet)
}

// OnlyPlugins limits the plugin types that FindInPath finds to types, as
// if the bin dir held just those binaries; the manager then skips
// networks that use any other type. With no types, every type is found
// again (the default). No file is read or written either way.
func (f *Exec) OnlyPlugins(types ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(types) == 0 {
		f.only = nil
		return
	}
	f.only = map[string]bool{}
	for _, t := range types {
		f.only[t] = true
	}
}

// PluginVersions sets the spec versions that plugin type typ reports in
// VERSION; by default it reports every version libcni knows. A network
// whose cniVersion its plugins do not support is skipped by the manager.
func (f *Exec) PluginVersions(typ string, versions ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions[typ] = slices.Clone(versions)
}

// Decode decodes a VERSION answer, as the real executor does.
func (f *Exec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}

// ExecPlugin records the call, holds it at the gates that select it
// ([Exec.Gate]) and at an [Exec.Hang], and answers it: with a
// [Exec.FailPlugin] error for its plugin type and verb, else as
// scripted for its network and verb, else with the default answer.
func (f *Exec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	c := newCall(pluginPath, stdin, environ)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	gates := f.gatesFor(c)
	f.mu.Unlock()
	for _, g := range gates {
		if err := g.hold(ctx, c); err != nil {
			return nil, err
		}
	}

	f.mu.Lock()
	var hang chan struct{}
	if r := f.rules[ruleKey{c.Network, c.Verb}]; r != nil {
		hang = r.hang
	}
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakecni: %s %s hung until its context ended: %w", c.Verb, c.Network, ctx.Err())
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failing[ruleKey{c.PluginType, c.Verb}]; err != nil {
		return nil, err
	}
	if r := f.rules[ruleKey{c.Network, c.Verb}]; r != nil {
		switch {
		case r.err != nil:
			return nil, r.err
		case r.hasResult:
			f.observe(c, r.result)
			return slices.Clone(r.result), nil
		}
	}
	out, err := f.defaultAnswer(c)
	if err == nil {
		f.observe(c, out)
	}
	return out, err
}

// defaultAnswer is the unscripted answer to c; f.mu is held.
func (f *Exec) defaultAnswer(c Call) ([]byte, error) {
	switch c.Verb {
	case "VERSION":
		vs := f.versions[c.PluginType]
		if vs == nil {
			vs = version.All.SupportedVersions()
		}
		return json.Marshal(map[string]any{"cniVersion": version.Current(), "supportedVersions": vs})
	case "ADD":
		if prev, ok := c.Config["prevResult"]; ok && prev != nil {
			// A chained plugin passes its predecessor's result on.
			return json.Marshal(prev)
		}
		p := f.subnets[c.Network]
		if p == nil {
			p = f.shared
		}
		return defaultResult(c, p)
	}
	return nil, nil
}

// Calls returns the recorded calls of the given verbs, in the order they
// were made. With no verbs it returns every call except VERSION: the
// manager asks VERSION in the background whenever it reads the conf dir,
// so those calls are recorded but returned only when asked for by name.
func (f *Exec) Calls(verbs ...string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if len(verbs) == 0 && c.Verb != "VERSION" || slices.Contains(verbs, c.Verb) {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the recorded calls and lookups. Scripts, gates,
// pools and the state of the fake netns are kept.
func (f *Exec) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
	f.lookups = map[string]int{}
}

// pool hands out the addresses of a subnet in order.
type pool struct {
	subnet netip.Prefix
	next   netip.Addr
}

func newPool(subnet netip.Prefix) *pool {
	subnet = subnet.Masked()
	return &pool{subnet: subnet, next: subnet.Addr().Next().Next()}
}

// take returns the next address and the gateway, the subnet's second
// address.
func (p *pool) take() (ip, gw netip.Addr, err error) {
	if !p.next.IsValid() || !p.subnet.Contains(p.next) {
		return ip, gw, &types.Error{Code: types.ErrTryAgainLater, Msg: "fakecni: subnet " + p.subnet.String() + " exhausted"}
	}
	ip = p.next
	p.next = p.next.Next()
	return ip, p.subnet.Addr().Next(), nil
}

// macFor derives a locally administered MAC from the last four bytes of
// ip, so that results are deterministic.
func macFor(ip netip.Addr) net.HardwareAddr {
	b := ip.AsSlice()
	return net.HardwareAddr{0x02, 0x42, b[len(b)-4], b[len(b)-3], b[len(b)-2], b[len(b)-1]}
}

// argsOf splits CNI_ARGS ("K1=v1;K2=v2") into a map.
func argsOf(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
