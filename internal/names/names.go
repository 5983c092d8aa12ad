package names

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
)

// Field names used in [InvalidNameError.Field] for the three names.
const (
	FieldNetwork     = "network"
	FieldContainerID = "container ID"
	FieldIfName      = "ifname"
)

// Length limits of the three names. Together they keep a cache file name,
// "<network>-<id>-<ifname>", within the 255 bytes that Linux file systems
// allow (100 + 1 + 128 + 1 + 15 = 245), so that no request can get as far
// as a plugin run and then fail at libcni's cache write.
const (
	MaxNetworkNameLen = 100
	MaxContainerIDLen = 128
	MaxIfNameLen      = 15
)

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

// ValidateNetworkName checks a network name as libcni's ADD does
// ([utils.ValidateNetworkName]: a letter or digit, then letters, digits,
// '_', '.' and '-'), plus [ValidateName] and [MaxNetworkNameLen].
func ValidateNetworkName(name string) error {
	return validate(FieldNetwork, name, MaxNetworkNameLen, utils.ValidateNetworkName)
}

// ValidateContainerID checks a container ID as libcni's ADD does
// ([utils.ValidateContainerID]), plus [ValidateName] and
// [MaxContainerIDLen].
func ValidateContainerID(id string) error {
	return validate(FieldContainerID, id, MaxContainerIDLen, utils.ValidateContainerID)
}

// ValidateIfName checks an interface name as libcni's ADD does
// ([utils.ValidateInterfaceName]: at most 15 bytes, no '/', ':' or
// whitespace), plus [ValidateName].
func ValidateIfName(ifname string) error {
	return validate(FieldIfName, ifname, MaxIfNameLen, utils.ValidateInterfaceName)
}

// ValidateNames checks the three names of one attachment with
// [ValidateNetworkName], [ValidateContainerID] and [ValidateIfName].
func ValidateNames(network, id, ifname string) error {
	if err := ValidateNetworkName(network); err != nil {
		return err
	}
	if err := ValidateContainerID(id); err != nil {
		return err
	}
	return ValidateIfName(ifname)
}

// validate applies the path checks, the length limit and libcni's check,
// in that order, and reports the first failure as an *InvalidNameError.
func validate(field, value string, maxLen int, libcniCheck func(string) *types.Error) error {
	if err := ValidateName(field, value); err != nil {
		return err
	}
	if len(value) > maxLen {
		return &InvalidNameError{
			Field: field, Value: value,
			Reason: fmt.Sprintf("is %d bytes long, more than %d", len(value), maxLen),
		}
	}
	if cerr := libcniCheck(value); cerr != nil {
		reason := cerr.Msg
		if cerr.Details != "" && cerr.Details != value {
			reason += ": " + cerr.Details
		}
		return &InvalidNameError{Field: field, Value: value, Reason: reason}
	}
	return nil
}
