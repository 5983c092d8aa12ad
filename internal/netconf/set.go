package netconf

import (
	"errors"
	"iter"
	"slices"

	"github.com/containernetworking/cni/libcni"
)

// Network is one loaded, validated network. It belongs to a [Set] and,
// like it, never changes: read it, do not modify it or its list.
type Network struct {
	Name string
	File string // the config file it was loaded from
	List *libcni.NetworkConfigList
	// Overrides are what its config file sets over the manager's options:
	// the teardown policy and the plugin timeouts.
	Overrides
}

// Set is one immutable snapshot of the loaded networks: the networks by
// name, the default network, and the files that were skipped, with why.
// A load builds a new set and publishes it whole (see [Loader.Snapshot]);
// a set is never modified once published, so it is read without locks.
type Set struct {
	confDir     string // for NotFound: the conf dir, or "memory"
	byName      map[string]*Network
	defaultName string
	skipped     []*ConfigError // files that were not loaded, in file order
	// unconfirmed holds the skips of files that a provisional load could
	// not read or parse, and that the set before it had not warned about:
	// they are logged at Debug only, until a later load confirms them.
	unconfirmed map[*ConfigError]bool
}

// NewSet builds a set by hand: the networks of conf dir confDir ("memory"
// for configs held in memory), and the default network's name ("" for
// none). A [Loader] builds its own sets; NewSet is for tests of the code
// that reads them.
func NewSet(confDir, defaultName string, nets ...*Network) *Set {
	s := &Set{confDir: confDir, byName: make(map[string]*Network, len(nets)), defaultName: defaultName}
	for _, n := range nets {
		s.byName[n.Name] = n
	}
	return s
}

// Network returns the network called name, or nil when it is not loaded.
func (s *Set) Network(name string) *Network { return s.byName[name] }

// DefaultName returns the default network's name: the fixed one (see
// [Config].DefaultNetwork), else the first valid file's network; "" when
// there is none. The default network may be missing from the set.
func (s *Set) DefaultName() string { return s.defaultName }

// Default returns the default network, or nil when it is not loaded.
func (s *Set) Default() *Network {
	if s.defaultName == "" {
		return nil
	}
	return s.byName[s.defaultName]
}

// Len returns how many networks are loaded.
func (s *Set) Len() int { return len(s.byName) }

// Names returns the loaded networks' names, sorted; an empty slice, not
// nil, when none is loaded.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// All yields the loaded networks by name, in name order.
func (s *Set) All() iter.Seq2[string, *Network] {
	return func(yield func(string, *Network) bool) {
		for _, name := range s.Names() {
			if !yield(name, s.byName[name]) {
				return
			}
		}
	}
}

// Skipped returns why files were not loaded, in file order, as a new
// slice (nil when none was skipped).
func (s *Set) Skipped() []*ConfigError { return append([]*ConfigError(nil), s.skipped...) }

// NotFound builds the error for network name, which is not loaded, with
// the reasons its files were skipped: a *[NetworkNotFoundError].
func (s *Set) NotFound(name string) error {
	e := &NetworkNotFoundError{Network: name, ConfDir: s.confDir}
	for _, sk := range s.skipped {
		if sk.Network == name {
			e.Skipped = append(e.Skipped, sk)
		}
	}
	return e
}

// pending reports whether name is missing only because a plugin has not
// answered VERSION yet.
func (s *Set) pending(name string) bool {
	if s.byName[name] != nil {
		return false
	}
	for _, sk := range s.skipped {
		if sk.Network == name && errors.Is(sk, ErrVersionPending) {
			return true
		}
	}
	return false
}

// warned reports whether s skipped e's file for the same kind of reason
// and logged it at Warn, so that a load does not log the same skip again.
func (s *Set) warned(e *ConfigError) bool {
	for _, sk := range s.skipped {
		if !s.unconfirmed[sk] && sk.File == e.File && sk.Network == e.Network && errors.Is(skipKind(sk), skipKind(e)) {
			return true
		}
	}
	return false
}

// skipKind returns the sentinel that says why e's file was skipped, or
// nil for none of them.
func skipKind(e *ConfigError) error {
	for _, kind := range []error{ErrInvalidConfig, ErrPluginNotFound, ErrUnsupportedVersion, ErrVersionFailed, ErrVersionPending} {
		if errors.Is(e, kind) {
			return kind
		}
	}
	return nil
}
