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

// MemoryTarget is what a manager's options offer [WithMemorySource]: a
// place for the source.
type MemoryTarget interface {
	// SetMemorySource makes the options load src instead of the conf
	// dir, and start no watcher (nil: the conf dir's files).
	SetMemorySource(src *MemorySource)
}

// WithMemorySource appends to opts the option that makes a manager load
// the config lists held in src instead of its conf dir's files, and start
// no watcher: the go-cni face hands the engine the networks it has
// parsed, and publishes each change with the manager's Reload. It is
// typed on the manager's Option (O, a func of P) without naming it, since
// package ocicni imports this one; the face calls it with its
// []ocicni.Option, and the engine's exported API gains nothing.
func WithMemorySource[O ~func(P) error, P MemoryTarget](opts []O, src *MemorySource) []O {
	return append(opts, O(func(p P) error {
		p.SetMemorySource(src)
		return nil
	}))
}
