package cache

import (
	"strings"
	"unicode"
)

// Field names used in [InvalidNameError.Field].
const (
	FieldNetwork     = "network"
	FieldContainerID = "container ID"
	FieldIfName      = "ifname"
)

// ValidateName checks that value, the field named by field (see
// [FieldNetwork], [FieldContainerID], [FieldIfName]), can safely become
// part of a file name. It rejects "", ".", any value containing '/', '\\',
// "..", NUL or another control character. The error is an
// *[InvalidNameError] that matches [ErrInvalidName].
//
// ValidateName is deliberately looser than libcni's own validation: it only
// guards the file system, so that entries written by any libcni version can
// still be read and removed.
func ValidateName(field, value string) error {
	reason := ""
	switch {
	case value == "":
		reason = "is empty"
	case value == ".":
		reason = `is "."`
	case strings.Contains(value, ".."):
		reason = `contains ".."`
	case strings.ContainsRune(value, '/'):
		reason = `contains '/'`
	case strings.ContainsRune(value, '\\'):
		reason = `contains '\'`
	case strings.ContainsRune(value, 0):
		reason = "contains NUL"
	case strings.ContainsFunc(value, unicode.IsControl):
		reason = "contains a control character"
	default:
		return nil
	}
	return &InvalidNameError{Field: field, Value: value, Reason: reason}
}

// FileName returns the libcni cache file name "<network>-<id>-<ifname>",
// after checking each part with [ValidateName].
func FileName(network, id, ifname string) (string, error) {
	if err := ValidateName(FieldNetwork, network); err != nil {
		return "", err
	}
	if err := ValidateName(FieldContainerID, id); err != nil {
		return "", err
	}
	if err := ValidateName(FieldIfName, ifname); err != nil {
		return "", err
	}
	return network + "-" + id + "-" + ifname, nil
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
