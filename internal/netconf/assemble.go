package netconf

import (
	"errors"
	"fmt"
	"slices"

	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"
)

// assemble builds the set of a scan whose VERSION calls have answered or
// been waited for; l.lock must be held. A file whose plugins have not
// answered yet keeps the network it had in the set published last.
func (l *Loader) assemble(s *scan) *Set {
	last := l.Snapshot()
	lastByFile := make(map[string]*Network, len(last.byName))
	for _, n := range last.byName {
		lastByFile[n.File] = n
	}
	set := NewSet(l.source, "")
	var firstValid string
	for _, f := range s.files {
		set.skipped = append(set.skipped, f.skips...)
		if s.provisional && f.readErr != nil && !last.warned(f.readErr) {
			if set.unconfirmed == nil {
				set.unconfirmed = make(map[*ConfigError]bool)
			}
			set.unconfirmed[f.readErr] = true
		}
		list := f.list
		if list == nil {
			continue
		}
		if cerr := l.validate(s, f.path, list); cerr != nil {
			set.skipped = append(set.skipped, cerr)
			kept := lastByFile[f.path]
			if !errors.Is(cerr, ErrVersionPending) || kept == nil {
				continue
			}
			list = kept.List
		}
		if n := l.network(set, f.path, list); n != nil && firstValid == "" {
			firstValid = n.Name
		}
	}
	set.defaultName = firstValid
	if l.fixed != "" {
		set.defaultName = l.fixed
	}
	return set
}

// network adds the network of list, from file, to set, and returns it;
// nil when the name is taken by an earlier file (logged), or a key of
// its [Overrides] is invalid (recorded as a skip).
func (l *Loader) network(set *Set, file string, list *libcni.NetworkConfigList) *Network {
	name := list.Name
	if prev, dup := set.byName[name]; dup {
		l.log.WithFields(logrus.Fields{"network": name, "file": file, "loaded": prev.File}).
			Warn("Ignoring duplicate network name; the first file in name order wins")
		return nil
	}
	over, oerr := OverridesFromBytes(list.Bytes)
	if oerr != nil {
		set.skipped = append(set.skipped, &ConfigError{File: file, Network: name, Err: oerr})
		return nil
	}
	n := &Network{Name: name, File: file, List: list, Overrides: over}
	set.byName[name] = n
	return n
}

// validate checks that every plugin binary exists, has answered VERSION,
// and supports the list's version.
func (l *Loader) validate(s *scan, file string, list *libcni.NetworkConfigList) *ConfigError {
	want := list.CNIVersion
	if want == "" {
		want = "0.1.0"
	}
	for _, p := range list.Plugins {
		typ := p.Network.Type
		b := s.bins[typ] // scan resolved every type of every list it kept
		if b.err != nil {
			return &ConfigError{File: file, Network: list.Name, Err: b.err}
		}
		answered, cut := l.versions.abandon(b.version)
		if cut {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s): %w; a later load asks it again",
					ErrVersionPending, typ, b.path, errVersionCut),
			}
		}
		if !answered {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s) has not answered within %v; the network loads when it does",
					ErrVersionPending, typ, b.path, l.wait),
			}
		}
		if err := b.version.err; err != nil {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("plugin %q (%s): %w", typ, b.path, err),
			}
		}
		if supported := b.version.info.SupportedVersions(); !slices.Contains(supported, want) {
			return &ConfigError{
				File: file, Network: list.Name,
				Err: fmt.Errorf("%w: plugin %q (%s) supports %v, config wants %q",
					ErrUnsupportedVersion, typ, b.path, supported, want),
			}
		}
	}
	return nil
}
