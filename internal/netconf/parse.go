package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/guard"
	"github.com/seed-671fdd43/ocicni/internal/names"
)

// MaxConfigFileSize is the largest network configuration file a load
// reads, and the largest plugin configuration file in a network's
// sub-folder. A larger file is skipped with a [ConfigError] that wraps
// [ErrInvalidConfig] and [fsutil.ErrTooLarge].
const MaxConfigFileSize = 4 << 20

// readConfigFile returns the content of a config file. Only regular files
// (or symlinks to them) of at most [MaxConfigFileSize] bytes are read, and
// a FIFO never blocks the read.
func readConfigFile(path string) ([]byte, error) {
	return fsutil.ReadRegular(path, MaxConfigFileSize, true)
}

// parseFile reads one config file into a network list, with the plugin
// configs of the list's sub-folder appended as libcni does.
func parseFile(path string, stamp fileStamp) *parsedFile {
	data, err := readConfigFile(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // else removed since the listing
			err = fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		return &parsedFile{stamp: stamp, err: &ConfigError{File: path, Err: err}}
	}
	pf := parseConfig(path, data, strings.HasSuffix(path, ".conflist"), filepath.Dir(path))
	pf.stamp = stamp
	return pf
}

// parseConfig parses and checks the config called file (a path, or the
// name of a config held in memory): a config list when conflist is set,
// else a single-plugin config. A list that does not set
// loadOnlyInlinedPlugins gets the ".conf" plugin configs of its
// sub-folder <subRoot>/<network name> appended, as libcni does; with
// subRoot "" (a config held in memory) no sub-folder is read. Files and
// configs held in memory go through the same checks here.
func parseConfig(file string, data []byte, conflist bool, subRoot string) *parsedFile {
	pf := &parsedFile{}
	fail := func(network string, err error) *parsedFile {
		pf.err = &ConfigError{File: file, Network: network, Err: err}
		return pf
	}
	list, err := guard.Value("libcni config parsing", file, func() (*libcni.NetworkConfigList, error) {
		return parseBytes(data, conflist)
	})
	if errors.Is(err, guard.ErrPanic) {
		err = fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err != nil {
		return fail(peekName(data), err)
	}
	if list.Name == "" {
		return fail("", fmt.Errorf("%w: no network name", ErrInvalidConfig))
	}
	// The name is checked before it becomes part of the sub-folder path.
	if err := names.ValidateNetworkName(list.Name); err != nil {
		return fail(list.Name, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if conflist && subRoot != "" && !list.LoadOnlyInlinedPlugins {
		if err := pf.addSubPlugins(filepath.Join(subRoot, list.Name), list); err != nil {
			return fail(list.Name, err)
		}
	}
	if len(list.Plugins) == 0 {
		return fail(list.Name, fmt.Errorf("%w: no plugins", ErrInvalidConfig))
	}
	if list.CNIVersion != "" {
		if _, _, _, err := version.ParseVersion(list.CNIVersion); err != nil {
			return fail(list.Name, fmt.Errorf("%w: cniVersion: %w", ErrInvalidConfig, err))
		}
	}
	for i, p := range list.Plugins {
		if err := ValidPluginType(p.Network.Type); err != nil {
			return fail(list.Name, fmt.Errorf("%w: plugin %d: %w", ErrInvalidConfig, i, err))
		}
	}
	pf.list = list
	return pf
}

// parseBytes parses a .conflist file, or a single-plugin .conf or .json
// file into a one-plugin list.
func parseBytes(data []byte, conflist bool) (*libcni.NetworkConfigList, error) {
	if conflist {
		list, err := libcni.NetworkConfFromBytes(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		return list, nil
	}
	conf, err := libcni.ConfFromBytes(data) //nolint:staticcheck // .conf/.json files are part of the contract
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return PluginConfToList(conf)
}

// addSubPlugins appends the plugins of the list's sub-folder dir, as
// libcni does, and makes list.Bytes hold them too.
func (pf *parsedFile) addSubPlugins(dir string, list *libcni.NetworkConfigList) error {
	pf.subDir = dir
	plugins, skipped, err := readSubPlugins(dir, list.Name)
	pf.subSkipped = skipped
	if err != nil || len(plugins) == 0 {
		return err
	}
	list.Plugins = append(list.Plugins, plugins...)
	return inlinePlugins(list)
}

// inlinePlugins rewrites list.Bytes so that its "plugins" hold every plugin
// of list.Plugins, the sub-folder's too. libcni caches list.Bytes at ADD
// and the DEL of a removed network's file runs from that cache, so the
// bytes must name every plugin that ADD ran, or the sub-folder's plugins
// would never get their DEL.
func inlinePlugins(list *libcni.NetworkConfigList) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(list.Bytes, &top); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	raws := make([]json.RawMessage, len(list.Plugins))
	for i, p := range list.Plugins {
		raws[i] = p.Bytes
	}
	plugins, err := json.Marshal(raws)
	if err != nil {
		return fmt.Errorf("%w: plugin config: %w", ErrInvalidConfig, err)
	}
	top["plugins"] = plugins
	b, err := json.Marshal(top)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	list.Bytes = b
	return nil
}

// readSubPlugins reads the extra plugin configs that libcni appends to a
// list that does not set loadOnlyInlinedPlugins: the ".conf" files of the
// sub-folder named after the network, in file name order. A missing
// sub-folder holds none. A file that is not regular is skipped and
// reported; any other unusable file makes the list invalid, as in libcni.
func readSubPlugins(dir, network string) ([]*libcni.PluginConfig, []*ConfigError, error) {
	paths, err := libcni.ConfFiles(dir, []string{".conf"})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading plugin configs: %w", ErrInvalidConfig, err)
	}
	var confs []*libcni.PluginConfig
	var skipped []*ConfigError
	for _, p := range paths {
		data, err := readConfigFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed since the listing
		case errors.Is(err, fsutil.ErrNotRegular):
			skipped = append(skipped, &ConfigError{File: p, Network: network, Err: fmt.Errorf("%w: %w", ErrInvalidConfig, err)})
			continue
		case err != nil:
			return nil, skipped, fmt.Errorf("%w: plugin config: %w", ErrInvalidConfig, err)
		}
		conf, err := libcni.NetworkPluginConfFromBytes(data)
		if err != nil {
			return nil, skipped, fmt.Errorf("%w: plugin config %s: %w", ErrInvalidConfig, p, err)
		}
		confs = append(confs, conf)
	}
	return confs, skipped, nil
}

// subDirExists reports whether a list's plugin sub-folder exists now (or
// is something that libcni would fail to read as one).
func subDirExists(dir string) bool {
	if dir == "" {
		return false
	}
	_, err := os.Stat(dir)
	return err == nil
}

// ValidPluginType rejects plugin types that would find a binary outside
// the bin dirs, and types no binary can be named after.
func ValidPluginType(typ string) error {
	switch {
	case typ == "":
		return errors.New("no type")
	case typ == "." || typ == "..":
		return fmt.Errorf("type %q is not a file name", typ)
	case strings.ContainsAny(typ, `/\`):
		return fmt.Errorf("type %q contains a path separator", typ)
	case strings.ContainsFunc(typ, unicode.IsControl):
		return fmt.Errorf("type %q contains a control character", typ)
	}
	return nil
}

// PluginConfToList turns a single-plugin config (a .conf or .json file, or
// the cache entry of an older libcni user) into a one-plugin list.
func PluginConfToList(conf *libcni.PluginConfig) (*libcni.NetworkConfigList, error) {
	if conf.Network.Type == "" {
		return nil, fmt.Errorf("%w: no plugin \"type\" (is this a .conflist?)", ErrInvalidConfig)
	}
	list, err := libcni.ConfListFromConf(conf) //nolint:staticcheck // .conf/.json files are part of the contract
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return list, nil
}

// peekName extracts a network name from a file that failed to parse, so
// that a request for that network can say why it is missing.
func peekName(data []byte) string {
	var v struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	return v.Name
}
