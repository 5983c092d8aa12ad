package cni

import (
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Opt configures a CNI instance, at [New] or at [CNI.Load]. Options that
// load networks append them to the list, in the order given; the
// interface name of each is decided when the option runs, so
// [WithInterfacePrefix] goes before them.
type Opt func(c *config) error

// config is what the options set. Its networks slice is replaced on every
// load, never modified in place once published.
type config struct {
	pluginDirs  []string
	confDir     string
	maxConfNum  int
	prefix      string
	minNetworks int
	engineOpts  []ocicni.Option // used by New only
	networks    []*Network
	// tracerProvider makes the face's spans; nil: the global one. Used
	// by New only.
	tracerProvider trace.TracerProvider
}

func defaultConfig() config {
	return config{
		pluginDirs:  []string{DefaultCNIDir},
		confDir:     DefaultNetDir,
		maxConfNum:  DefaultMaxConfNum,
		prefix:      DefaultPrefix,
		minNetworks: 1,
	}
}

func (c *config) ifName(i int) string { return fmt.Sprintf("%s%d", c.prefix, i) }

func (c *config) add(list *libcni.NetworkConfigList, ifName string) {
	c.networks = append(c.networks, &Network{config: list, ifName: ifName})
}

// WithInterfacePrefix sets the prefix of interface names: network i of a
// load gets prefix+i. The default is "eth".
func WithInterfacePrefix(prefix string) Opt {
	return func(c *config) error {
		c.prefix = prefix
		return nil
	}
}

// WithPluginDir sets the directories searched for plugin binaries. Only
// the value at [New] reaches the engine; a later Load keeps it.
func WithPluginDir(dirs []string) Opt {
	return func(c *config) error {
		c.pluginDirs = dirs
		return nil
	}
}

// WithPluginConfDir sets the conf dir that [WithDefaultConf] and
// [WithAllConf] read.
func WithPluginConfDir(dir string) Opt {
	return func(c *config) error {
		c.confDir = dir
		return nil
	}
}

// WithPluginMaxConfNum sets how many files of the conf dir
// [WithDefaultConf] loads; 0 or less loads them all.
func WithPluginMaxConfNum(maxConfigs int) Opt {
	return func(c *config) error {
		c.maxConfNum = maxConfigs
		return nil
	}
}

// WithMinNetworkCount sets how many networks, the loopback network
// included, must be loaded for Status, Setup and Check to proceed. The
// default is 1.
func WithMinNetworkCount(count int) Opt {
	return func(c *config) error {
		c.minNetworks = count
		return nil
	}
}

// WithEngineOptions passes options to the engine that [New] creates
// (package ocicni), for example [ocicni.WithCacheDir], [ocicni.WithLogger]
// or, in tests, [ocicni.WithExec] and [ocicni.WithNetNSOps]. After them,
// the face makes the engine load the face's networks from memory (see the
// package doc), so a conf dir given here is not read, and turns its
// watcher off. It is an addition to go-cni's options, and has effect at
// New only.
func WithEngineOptions(opts ...ocicni.Option) Opt {
	return func(c *config) error {
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// loopbackList is the loopback network as go-cni lists it. Its plugin
// never runs: the engine sets lo up itself in every sandbox.
var loopbackList = func() *libcni.NetworkConfigList {
	l, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"0.3.1","name":"cni-loopback","plugins":[{"type":"loopback"}]}`))
	if err != nil {
		panic(err) // a constant that parses; see TestLoopbackList
	}
	return l
}()

// WithLoNetwork adds the loopback network, on interface "lo". No loopback
// plugin runs for it: the engine sets lo up in-process in every sandbox,
// and results list lo with 127.0.0.1/8 and ::1/128 as the loopback plugin
// reports them.
func WithLoNetwork(c *config) error {
	c.networks = append(c.networks, &Network{config: loopbackList, ifName: "lo", loopback: true})
	return nil
}

// WithConf adds a network from a single-plugin config, on interface
// prefix+0.
func WithConf(bytes []byte) Opt { return WithConfIndex(bytes, 0) }

// WithConfIndex adds a network from a single-plugin config, on interface
// prefix+index.
func WithConfIndex(bytes []byte, index int) Opt {
	return func(c *config) error {
		conf, err := libcni.ConfFromBytes(bytes) //nolint:staticcheck // single-plugin configs are part of go-cni's API
		if err != nil {
			return err
		}
		list, err := libcni.ConfListFromConf(conf) //nolint:staticcheck // single-plugin configs are part of go-cni's API
		if err != nil {
			return err
		}
		c.add(list, c.ifName(index))
		return nil
	}
}

// WithConfFile adds a network from a single-plugin config file, given by
// its absolute path, on interface prefix+0.
func WithConfFile(fileName string) Opt {
	return func(c *config) error {
		conf, err := libcni.ConfFromFile(fileName) //nolint:staticcheck // single-plugin configs are part of go-cni's API
		if err != nil {
			return err
		}
		list, err := libcni.ConfListFromConf(conf) //nolint:staticcheck // single-plugin configs are part of go-cni's API
		if err != nil {
			return err
		}
		c.add(list, c.ifName(0))
		return nil
	}
}

// WithConfListBytes adds a network from a config list. Its interface is
// prefix+n, where n counts the networks loaded before it, the loopback
// network included.
func WithConfListBytes(bytes []byte) Opt {
	return func(c *config) error {
		list, err := libcni.ConfListFromBytes(bytes)
		if err != nil {
			return err
		}
		c.add(list, c.ifName(len(c.networks)))
		return nil
	}
}

// WithConfListFile adds a network from a config list file, given by its
// absolute path, numbered as by [WithConfListBytes].
func WithConfListFile(fileName string) Opt {
	return func(c *config) error {
		list, err := libcni.ConfListFromFile(fileName)
		if err != nil {
			return err
		}
		c.add(list, c.ifName(len(c.networks)))
		return nil
	}
}

// WithDefaultConf loads the first [WithPluginMaxConfNum] files (one by
// default) of the conf dir, in file name order, on interfaces prefix+0,
// prefix+1, ... The first is the default network: the CNI spec names
// none.
func WithDefaultConf(c *config) error { return c.loadConfDir(c.maxConfNum) }

// WithAllConf loads every file of the conf dir, as [WithDefaultConf] does.
func WithAllConf(c *config) error { return c.loadConfDir(0) }
