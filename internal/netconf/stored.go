package netconf

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"

	"github.com/seed-671fdd43/ocicni/internal/guard"
)

// Stored returns the config list that b holds for network name, as a
// libcni cache entry or a config saved with an order record stores it
// (file names where, for errors), and what it overrides of the manager's
// options. When b holds the very bytes of the loaded network's config, as
// it does unless the file changed since the ADD, the loaded list is
// returned and nothing is parsed again.
//
// Otherwise b is parsed, under [guard.Value], as a config list or a
// single plugin config, as older libcni users cached. It must name
// network name (libcni derives the cache path from it) and only plugin
// types that cannot leave the bin dirs. A bad override key in it means
// the defaults: the config was usable when it was stored.
func (s *Set) Stored(b []byte, name, file string) (*libcni.NetworkConfigList, Overrides, error) {
	if n := s.Network(name); n != nil && bytes.Equal(n.List.Bytes, b) {
		return n.List, n.Overrides, nil
	}
	list, err := guard.Value("libcni config parsing", file, func() (*libcni.NetworkConfigList, error) { return storedList(b, name) })
	if err != nil {
		return nil, Overrides{}, err
	}
	over, _ := OverridesFromBytes(b)
	return list, over, nil
}

func storedList(b []byte, name string) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil || len(list.Plugins) == 0 {
		conf, cerr := libcni.ConfFromBytes(b) //nolint:staticcheck // older libcni users cached plain configs
		if cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		if list, err = PluginConfToList(conf); err != nil {
			return nil, err
		}
	}
	if list.Name != name {
		return nil, fmt.Errorf("%w: cached config is network %q, the entry is %q", ErrInvalidConfig, list.Name, name)
	}
	for i, p := range list.Plugins {
		if err := ValidPluginType(p.Network.Type); err != nil {
			return nil, fmt.Errorf("%w: plugin %d: %w", ErrInvalidConfig, i, err)
		}
	}
	return list, nil
}
