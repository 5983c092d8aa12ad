package netconf

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
)

// MemoryConfig is one network configuration held in memory: a config
// list, as a ".conflist" file of the conf dir holds one.
type MemoryConfig struct {
	// Name stands where a file's path would: in [Network].File,
	// [ConfigError].File and the log. A config whose name an earlier one
	// has is skipped.
	Name string
	// Bytes is the config list. It must not be modified once given to
	// [MemorySource.Set].
	Bytes []byte
}

// MemorySource holds the configs that a loader created with
// [Config].Memory loads instead of reading a conf dir, for a caller that
// parses its networks itself (package gocni) and must not write them to
// disk for the loader to read back. Its zero value holds none. Set and the
// loads may run concurrently.
type MemorySource struct {
	mu      sync.Mutex // guards configs; a leaf, taken under the loader's lock
	configs []MemoryConfig
}

// Set replaces the configs, in the order that the loader takes for file
// name order: the first valid one is the default network unless
// [Config].DefaultNetwork fixes it. A load that starts after Set returns
// reads them; call [Loader.Load] to publish them before going on.
func (m *MemorySource) Set(configs ...MemoryConfig) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.configs = slices.Clone(configs)
}

func (m *MemorySource) get() []MemoryConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.configs
}

// memorySourceName names a [MemorySource] where a conf dir's path would
// stand, as in [NetworkNotFoundError].ConfDir.
const memorySourceName = "memory"

// readMemory parses the configs of l.memory in their order, as readDir
// parses files, re-parsing only those whose bytes changed; l.lock must be
// held. A config held in memory has no sub-folder and no half-written
// state, so an invalid one is skipped without keeping its last valid
// parse.
func (l *Loader) readMemory() []readConfig {
	configs := l.memory.get()
	out := make([]readConfig, 0, len(configs))
	seen := make(map[string]bool, len(configs))
	for _, c := range configs {
		if seen[c.Name] {
			out = append(out, readConfig{name: c.Name, parsed: &parsedFile{err: &ConfigError{
				File: c.Name, Network: peekName(c.Bytes),
				Err: fmt.Errorf("%w: an earlier config in memory has the name %q", ErrInvalidConfig, c.Name),
			}}})
			continue
		}
		seen[c.Name] = true
		pf := l.files[c.Name]
		if pf == nil || !bytes.Equal(pf.data, c.Bytes) {
			pf = parseConfig(c.Name, c.Bytes, true, "")
			pf.data = c.Bytes
			l.files[c.Name] = pf
		}
		out = append(out, readConfig{name: c.Name, parsed: pf})
	}
	return out
}
