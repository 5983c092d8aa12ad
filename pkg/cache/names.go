package cache

import (
	"path/filepath"
	"strings"

	"github.com/seed-671fdd43/ocicni/internal/names"
)

// Field names used in [InvalidNameError.Field].
const (
	FieldNetwork      = names.FieldNetwork
	FieldContainerID  = names.FieldContainerID
	FieldIfName       = names.FieldIfName
	FieldNetNS        = "netns path"
	FieldConfigDigest = "config digest"
)

// Length limits of the three names. Together they keep a cache file name,
// "<network>-<id>-<ifname>", within the 255 bytes that Linux file systems
// allow (100 + 1 + 128 + 1 + 15 = 245), so that no request can get as far
// as a plugin run and then fail at libcni's cache write.
const (
	MaxNetworkNameLen = names.MaxNetworkNameLen
	MaxContainerIDLen = names.MaxContainerIDLen
	MaxIfNameLen      = names.MaxIfNameLen
)

// The name rules live in package names, below this package and the
// config loader, which both apply them; the functions here are the
// public face of those rules, with the same results and errors.

// ValidateName checks that value, the field named by field (see
// [FieldNetwork], [FieldContainerID], [FieldIfName]), can safely become
// part of a file name. It rejects "", ".", any value containing '/', '\\',
// "..", NUL or another control character. The error is an
// *[InvalidNameError] that matches [ErrInvalidName].
//
// ValidateName only guards the file system. Names that are acted on
// (requests, and every name read from a cache file or an order record) are
// checked with the stricter [ValidateNetworkName], [ValidateContainerID]
// and [ValidateIfName].
func ValidateName(field, value string) error { return names.ValidateName(field, value) }

// ValidateNetworkName checks a network name as libcni's ADD does
// ([utils.ValidateNetworkName]: a letter or digit, then letters, digits,
// '_', '.' and '-'), plus [ValidateName] and [MaxNetworkNameLen].
func ValidateNetworkName(name string) error { return names.ValidateNetworkName(name) }

// ValidateContainerID checks a container ID as libcni's ADD does
// ([utils.ValidateContainerID]), plus [ValidateName] and
// [MaxContainerIDLen].
func ValidateContainerID(id string) error { return names.ValidateContainerID(id) }

// ValidateIfName checks an interface name as libcni's ADD does
// ([utils.ValidateInterfaceName]: at most 15 bytes, no '/', ':' or
// whitespace), plus [ValidateName].
func ValidateIfName(ifname string) error { return names.ValidateIfName(ifname) }

// ValidateNames checks the three names of one attachment with
// [ValidateNetworkName], [ValidateContainerID] and [ValidateIfName].
func ValidateNames(network, id, ifname string) error {
	return names.ValidateNames(network, id, ifname)
}

// FileName returns the libcni cache file name "<network>-<id>-<ifname>",
// after checking the names with [ValidateNames].
func FileName(network, id, ifname string) (string, error) {
	if err := ValidateNames(network, id, ifname); err != nil {
		return "", err
	}
	return network + "-" + id + "-" + ifname, nil
}

// ParseFileName is [SplitFileName] for a file name read from the results
// directory: it also requires id and both parts to pass [ValidateNames],
// so that names learnt from it can be used to build paths and plugin
// environments. path may be a full path; only its base name is used.
func ParseFileName(path, id string) (network, ifname string, ok bool) {
	network, ifname, ok = SplitFileName(filepath.Base(path), id)
	if !ok || ValidateNames(network, id, ifname) != nil {
		return "", "", false
	}
	return network, ifname, true
}

// SplitFileName splits a cache file name for the known container id into
// its network and interface name. Both names may contain '-', so the split
// needs the id: it uses the first occurrence of "-<id>-" that leaves a
// non-empty network before it and a non-empty ifname after it. ok is false
// when there is no such occurrence.
func SplitFileName(name, id string) (network, ifname string, ok bool) {
	if id == "" {
		return "", "", false
	}
	sep := "-" + id + "-"
	for from := 0; from < len(name); {
		i := strings.Index(name[from:], sep)
		if i < 0 {
			return "", "", false
		}
		pos := from + i
		if pos > 0 && pos+len(sep) < len(name) {
			return name[:pos], name[pos+len(sep):], true
		}
		from = pos + 1
	}
	return "", "", false
}

// GuessFileName splits the name of a cache file whose content cannot tell
// its container: exactly around one of the known container IDs, else after
// one of the known network names and at the last '-'. path may be a full
// path; only its base name is used. Every part passes [ValidateNames], or
// all three are "".
func GuessFileName(path string, knownIDs, networks []string) (network, id, ifname string) {
	name := filepath.Base(path)
	for _, known := range knownIDs {
		if n, i, ok := ParseFileName(name, known); ok {
			return n, known, i
		}
	}
	for _, n := range networks {
		rest, ok := strings.CutPrefix(name, n+"-")
		if !ok {
			continue
		}
		if cut := strings.LastIndex(rest, "-"); cut > 0 && ValidateNames(n, rest[:cut], rest[cut+1:]) == nil {
			return n, rest[:cut], rest[cut+1:]
		}
	}
	return "", "", ""
}

// GuessNames returns corrupt with the names of each file whose content
// could not tell its container (an *[EntryError] without a Network)
// guessed from its file name by [GuessFileName], with knownIDs and
// networks. A file whose name splits so is replaced by a copy that holds
// the guessed names; every other file is corrupt's own, so that
// out[i] != corrupt[i] tells a guess. corrupt is not modified.
func GuessNames(corrupt []*EntryError, knownIDs, networks []string) []*EntryError {
	out := make([]*EntryError, len(corrupt))
	for i, ee := range corrupt {
		out[i] = ee
		if ee.Network != "" {
			continue
		}
		if network, id, ifname := GuessFileName(ee.Path, knownIDs, networks); network != "" {
			guess := *ee
			guess.Network, guess.ContainerID, guess.IfName = network, id, ifname
			out[i] = &guess
		}
	}
	return out
}
