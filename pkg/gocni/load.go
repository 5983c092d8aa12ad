package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"

	"github.com/seed-671fdd43/ocicni/internal/netconf"
)

// loadConfDir appends up to maxConfigs networks (all when maxConfigs <= 0)
// from the conf dir's ".conf", ".conflist" and ".json" files, in file name
// order. As in go-cni, a file that cannot be used fails the load.
func (c *config) loadConfDir(maxConfigs int) error {
	files, err := libcni.ConfFiles(c.confDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return fmt.Errorf("reading conf dir %s: %w: %w", c.confDir, err, ErrRead)
	}
	if len(files) == 0 {
		return fmt.Errorf("no network config found in %s: %w", c.confDir, ErrCNINotInitialized)
	}
	sort.Strings(files)
	var found []*Network
	for _, file := range files {
		list, err := readConfFile(file)
		if err != nil {
			return err
		}
		found = append(found, &Network{config: list, ifName: c.ifName(len(found))})
		if len(found) == maxConfigs {
			break
		}
	}
	c.networks = append(c.networks, found...)
	return nil
}

func readConfFile(file string) (*libcni.NetworkConfigList, error) {
	var list *libcni.NetworkConfigList
	if strings.HasSuffix(file, ".conflist") {
		l, err := libcni.ConfListFromFile(file)
		if err != nil {
			return nil, fmt.Errorf("loading CNI config list %s: %w: %w", file, err, ErrInvalidConfig)
		}
		list = l
	} else {
		conf, err := libcni.ConfFromFile(file) //nolint:staticcheck // single-plugin configs are part of go-cni's API
		if err != nil {
			return nil, fmt.Errorf("loading CNI config %s: %w: %w", file, err, ErrInvalidConfig)
		}
		if conf.Network.Type == "" {
			return nil, fmt.Errorf("no plugin type in %s: %w", file, ErrInvalidConfig)
		}
		if list, err = libcni.ConfListFromConf(conf); err != nil { //nolint:staticcheck // single-plugin configs are part of go-cni's API
			return nil, fmt.Errorf("converting CNI config %s to a list: %w: %w", file, err, ErrInvalidConfig)
		}
	}
	if len(list.Plugins) == 0 {
		return nil, fmt.Errorf("CNI config list %s has no plugins: %w", file, ErrInvalidConfig)
	}
	return list, nil
}

// Load replaces the loaded networks with the ones opts load, in order, and
// makes the engine use them before it returns. As in go-cni, an option
// that fails ends the load with an error matching [ErrLoad], and the
// networks loaded by the options before it stay; Status then reports
// [ErrCNINotInitialized] when they are too few. Load also remembers opts:
// a Setup, Check or Status that finds too few networks runs them again
// first, so the face recovers from a conf file that came back without
// waiting for the caller's watcher. Remove never depends on Load.
func (f *Face) Load(opts ...Opt) error {
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	return f.loadLocked(opts)
}

// loadLocked is Load with f.loadMu held.
func (f *Face) loadLocked(opts []Opt) error {
	f.mu.RLock()
	next := f.cfg
	f.mu.RUnlock()
	next.networks = nil
	var err error
	for _, o := range opts {
		if err = o(&next); err != nil {
			err = fmt.Errorf("cni config load failed: %w: %w", err, ErrLoad)
			break
		}
	}
	mErr := f.publish(next.networks)
	f.mu.Lock()
	f.cfg, f.lastLoad = next, opts
	f.mu.Unlock()
	return errors.Join(err, mErr)
}

// ready returns the loaded networks and the interface prefix, or
// ErrCNINotInitialized when fewer than the minimum are loaded even after
// running the last load again.
func (f *Face) ready() ([]*Network, string, error) {
	f.mu.RLock()
	nets, prefix, minimum := f.cfg.networks, f.cfg.prefix, f.cfg.minNetworks
	f.mu.RUnlock()
	if len(nets) >= minimum {
		return nets, prefix, nil
	}
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	f.mu.RLock()
	nets, replay := f.cfg.networks, f.lastLoad
	f.mu.RUnlock()
	var loadErr error
	if len(nets) < minimum && replay != nil {
		loadErr = f.loadLocked(replay)
	}
	f.mu.RLock()
	nets, prefix, minimum = f.cfg.networks, f.cfg.prefix, f.cfg.minNetworks
	f.mu.RUnlock()
	if len(nets) >= minimum {
		return nets, prefix, nil
	}
	if loadErr != nil {
		return nil, "", fmt.Errorf("%w (reloading: %w)", ErrCNINotInitialized, loadErr)
	}
	return nil, "", ErrCNINotInitialized
}

// publish hands nets (loopback excepted) to the engine, in order, and
// has it load them before it returns. Every plugin of a list is given
// inline (a sub-folder's plugins included), so the engine sees what the
// face parsed. Each config is named after its index in
// [ConfigResult].Networks, which is where the engine's messages about it
// (a skip, a missing plugin) point. Called with f.loadMu held.
func (f *Face) publish(nets []*Network) error {
	configs := make([]netconf.MemoryConfig, 0, len(nets))
	for i, n := range nets {
		if n.loopback {
			continue
		}
		data, err := inlineList(n.config)
		if err != nil {
			return fmt.Errorf("gocni: network %q: %w: %w", n.config.Name, err, ErrInvalidConfig)
		}
		configs = append(configs, netconf.MemoryConfig{Name: fmt.Sprintf("networks[%d]", i), Bytes: data})
	}
	f.src.Set(configs...)
	return f.engine.Reload(context.Background())
}

// inlineList returns list's JSON with every plugin inline and
// loadOnlyInlinedPlugins set, so that the config that libcni caches at ADD
// (and a DEL from the cache runs) names every plugin that ran.
func inlineList(list *libcni.NetworkConfigList) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(list.Bytes, &top); err != nil {
		return nil, err
	}
	plugins := make([]json.RawMessage, 0, len(list.Plugins))
	for _, p := range list.Plugins {
		plugins = append(plugins, p.Bytes)
	}
	raw, err := json.Marshal(plugins)
	if err != nil {
		return nil, err
	}
	top["plugins"] = raw
	top["loadOnlyInlinedPlugins"] = json.RawMessage("true")
	return json.Marshal(top)
}
