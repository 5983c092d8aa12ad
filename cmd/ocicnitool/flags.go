package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Defaults of the directory flags. libcni's cache dir has no constant in
// the public API of pkg/ocicni; cache.New("") uses the same directory.
const (
	defaultCacheDir = "/var/lib/cni"
	netnsRunDir     = "/run/netns"
	defaultTimeout  = time.Minute
)

// listFlag is a repeatable flag whose values may also be comma lists:
// "--bin-dir a --bin-dir b" and "--bin-dir a,b" are the same.
type listFlag struct {
	values []string
	set    bool // false while the values are the defaults
}

func (l *listFlag) String() string { return strings.Join(l.values, ",") }

func (l *listFlag) Set(v string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.values = append(l.values, s)
		}
	}
	return nil
}

// globals are the flags shared by the subcommands. Each subcommand
// registers the groups it uses.
type globals struct {
	confDir  string
	binDirs  listFlag
	cacheDir string
	json     bool
	timeout  time.Duration
	debug    bool

	// listsSkips is set by the commands whose output lists the config
	// files the library skipped, with the reason: the library's warnings
	// about them are left out of its log then, unless --debug.
	listsSkips bool

	stderr io.Writer
}

// dirFlags registers --conf-dir, --bin-dir and --cache-dir.
func (g *globals) dirFlags(fs *flag.FlagSet) {
	fs.StringVar(&g.confDir, "conf-dir", ocicni.DefaultConfDir, "directory of CNI network configuration files")
	g.binDirs = listFlag{values: []string{ocicni.DefaultBinDir}}
	fs.Var(&g.binDirs, "bin-dir", "directory of CNI plugin binaries (repeatable, or a comma list)")
	g.cacheFlag(fs)
}

// cacheFlag registers --cache-dir alone.
func (g *globals) cacheFlag(fs *flag.FlagSet) {
	fs.StringVar(&g.cacheDir, "cache-dir", defaultCacheDir, "libcni cache directory (results/ and ocicni/ inside)")
}

// outputFlags registers --json.
func (g *globals) outputFlags(fs *flag.FlagSet) {
	fs.BoolVar(&g.json, "json", false, "print JSON on stdout instead of a table (messages still go to stderr)")
}

// runFlags registers --timeout and --debug, for commands that run plugins.
func (g *globals) runFlags(fs *flag.FlagSet) {
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "give up, killing running plugins, after this long")
	fs.BoolVar(&g.debug, "debug", false, "log the library's debug messages to stderr")
}

// manager builds an ocicni manager from the directory flags, without a
// watcher and without background DEL retries: the command runs once, next
// to the runtime's own manager, which heals what fails (a failed DEL here
// is recorded with its retry state all the same). The library logs to
// stderr, warnings and up unless --debug.
func (g *globals) manager() (*ocicni.Manager, error) {
	confDir, err := absDir("conf-dir", g.confDir)
	if err != nil {
		return nil, err
	}
	binDirs := make([]string, 0, len(g.binDirs.values))
	for _, d := range g.binDirs.values {
		abs, err := absDir("bin-dir", d)
		if err != nil {
			return nil, err
		}
		binDirs = append(binDirs, abs)
	}
	return g.newManager(ocicni.WithConfDir(confDir), ocicni.WithBinDirs(binDirs...))
}

// cacheManager builds a manager for the commands that only read the cache
// dir (cache ls), from --cache-dir alone. Its conf and bin dirs are
// <cache-dir>/ocicni/no-conf, which nothing creates: it loads no network
// and finds no plugin, so it runs none (a load runs the VERSION of the
// plugins that configs name), and it needs no conf dir on the node.
func (g *globals) cacheManager() (*ocicni.Manager, error) {
	cacheDir, err := absDir("cache-dir", g.cacheDir)
	if err != nil {
		return nil, err
	}
	none := filepath.Join(cacheDir, "ocicni", "no-conf")
	return g.newManager(ocicni.WithConfDir(none), ocicni.WithBinDirs(none))
}

// newManager builds a manager on --cache-dir, as [globals.manager] says,
// with opts for its conf and bin dirs.
func (g *globals) newManager(opts ...ocicni.Option) (*ocicni.Manager, error) {
	cacheDir, err := absDir("cache-dir", g.cacheDir)
	if err != nil {
		return nil, err
	}
	log := logrus.New()
	log.SetOutput(g.stderr)
	log.SetLevel(logrus.WarnLevel)
	if g.debug {
		log.SetLevel(logrus.DebugLevel)
	}
	var held *heldLog
	if g.listsSkips && !g.debug {
		held = holdLog(log) // until the skipped files are known
	}
	m, err := ocicni.New(append([]ocicni.Option{
		ocicni.WithCacheDir(cacheDir),
		ocicni.WithoutWatcher(),
		ocicni.WithoutHealing(),
		ocicni.WithLogger(logrus.NewEntry(log).WithField("component", "ocicnitool")),
	}, opts...)...)
	if held != nil {
		var skipped []*ocicni.ConfigError
		if err == nil {
			skipped = m.Skipped()
		}
		held.release(skipped)
	}
	return m, err
}

// shutdown stops a manager built by [globals.manager]. Without a watcher
// Shutdown has nothing that can fail; its error is nil.
func shutdown(m *ocicni.Manager) { _ = m.Shutdown() }

// session creates the manager and a context bounded by --timeout; end
// cancels the context and shuts the manager down.
func (g *globals) session(ctx context.Context) (m *ocicni.Manager, sctx context.Context, end func(), err error) {
	if m, err = g.manager(); err != nil {
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, g.timeout)
	return m, sctx, func() { cancel(); shutdown(m) }, nil
}

// cache names the cache dir of --cache-dir, for its paths: what is in it
// is read through a manager's inventory (see [globals.cacheManager]).
func (g *globals) cache() (*cache.Cache, error) {
	dir, err := absDir("cache-dir", g.cacheDir)
	if err != nil {
		return nil, err
	}
	return cache.New(dir), nil
}

// absDir makes a directory flag's value absolute, as the library wants.
func absDir(flagName, dir string) (string, error) {
	if dir == "" {
		return "", usageErr(fmt.Errorf("--%s must not be empty", flagName))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usageErr(fmt.Errorf("--%s %q: %w", flagName, dir, err))
	}
	return abs, nil
}

// podFlags are the flags that describe a pod: its networks and the
// identity that goes into CNI_ARGS.
type podFlags struct {
	networks  listFlag
	name      string
	namespace string
	uid       string
}

func (p *podFlags) register(fs *flag.FlagSet) {
	fs.Var(&p.networks, "network", "network to use, as name or name:ifname (repeatable, or a comma list;\n"+
		"default: the default network for add, every cached attachment for del)")
	fs.StringVar(&p.name, "pod-name", "", "pod name (K8S_POD_NAME)")
	fs.StringVar(&p.namespace, "pod-namespace", "", "pod namespace (K8S_POD_NAMESPACE)")
	fs.StringVar(&p.uid, "pod-uid", "", "pod UID (K8S_POD_UID)")
}

// pod builds the PodNetwork for container id; the caller sets its netns.
func (p *podFlags) pod(id string) (ocicni.PodNetwork, error) {
	atts, err := parseNetworks(p.networks.values)
	if err != nil {
		return ocicni.PodNetwork{}, err
	}
	return ocicni.PodNetwork{
		Name: p.name, Namespace: p.namespace, UID: p.uid,
		ID: id, Networks: atts,
	}, nil
}

// parseNetworks parses "name[:ifname]" values. Network names cannot hold
// ':', so the first one separates the ifname.
func parseNetworks(values []string) ([]ocicni.NetAttachment, error) {
	atts := make([]ocicni.NetAttachment, 0, len(values))
	for _, v := range values {
		name, ifname, hasIf := strings.Cut(v, ":")
		if name == "" || (hasIf && ifname == "") {
			return nil, usageErr(fmt.Errorf("--network %q: want name or name:ifname", v))
		}
		atts = append(atts, ocicni.NetAttachment{Name: name, Ifname: ifname})
	}
	return atts, nil
}

// resolveNetNS turns the NETNS argument into an absolute path: a value
// without a slash names a namespace under /run/netns (as "ip netns" pins
// them), anything else is a path.
func resolveNetNS(arg string) (string, error) {
	switch {
	case arg == "":
		return "", usageErr(errors.New("empty NETNS"))
	case arg == "." || arg == "..":
		return "", usageErr(fmt.Errorf("NETNS %q: not a namespace name", arg))
	case !strings.Contains(arg, "/"):
		return filepath.Join(netnsRunDir, arg), nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return "", usageErr(fmt.Errorf("NETNS %q: %w", arg, err))
	}
	return abs, nil
}

// existingNetNS is resolveNetNS for commands that enter the namespace: a
// missing one is "not found".
func existingNetNS(arg string) (string, error) {
	path, err := resolveNetNS(arg)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", notFound(fmt.Errorf("netns %s does not exist", path))
	}
	return path, nil
}

// parseArgs parses flags and positional arguments in any order ("add -json
// ns id" and "add ns id -json"). After "--" everything is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// leadingGlobals splits off the global flags (see globalFlags) that come
// before the command's words, with their values: "--conf-dir X status"
// runs status with --conf-dir X, as Go CLIs people use accept. A flag
// that is not a global one ends them: the command line is then an
// unknown command.
func leadingGlobals(args []string) (flags, rest []string) {
	i := 0
	for i < len(args) {
		name, value, ok := globalFlagAt(args[i])
		if !ok {
			break
		}
		i++
		if takesValue(name) && !value && i < len(args) {
			i++
		}
	}
	return args[:i:i], args[i:]
}

// dropUnusedGlobals removes from args the global flags that fs does not
// define, with their values, so that a command takes every global flag
// and ignores those it does not use ("cache ls --conf-dir X" lists the
// cache as "cache ls" does). Positional arguments and the command's own
// flags are left as they are; nothing after "--" is looked at.
func dropUnusedGlobals(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			return append(out, args[i:]...)
		}
		name, value, ok := globalFlagAt(args[i])
		if !ok || fs.Lookup(name) != nil {
			out = append(out, args[i])
			continue
		}
		if takesValue(name) && !value {
			i++ // its value goes with it
		}
	}
	return out
}

// globalFlagAt reports whether arg is a global flag ("-name",
// "--name" or either with "=value"), its name, and whether it carries
// its value.
func globalFlagAt(arg string) (name string, value, ok bool) {
	if arg == "-" || arg == "--" || !strings.HasPrefix(arg, "-") {
		return "", false, false
	}
	name = strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	name, _, value = strings.Cut(name, "=")
	for _, gf := range globalFlags {
		if gf.name == name {
			return name, value, true
		}
	}
	return "", false, false
}

// takesValue reports whether the global flag name takes a value.
func takesValue(name string) bool {
	for _, gf := range globalFlags {
		if gf.name == name {
			return gf.arg != ""
		}
	}
	return false
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, lo, hi int, names string) error {
	if len(args) < lo || len(args) > hi {
		return usageErr(fmt.Errorf("want arguments %s, got %d", names, len(args)))
	}
	return nil
}
