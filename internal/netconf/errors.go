package netconf

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of config loading. Package ocicni re-exports each under
// the same name, and their text keeps its "ocicni:" prefix: runtimes see
// them through that package. Match them with errors.Is.
var (
	// ErrNetworkNotFound means a requested network is not loaded.
	ErrNetworkNotFound = errors.New("ocicni: network not found")
	// ErrInvalidConfig marks a configuration file that cannot be used.
	ErrInvalidConfig = errors.New("ocicni: invalid network configuration")
	// ErrPluginNotFound means a plugin binary is missing from every bin dir.
	ErrPluginNotFound = errors.New("ocicni: plugin binary not found")
	// ErrUnsupportedVersion means a plugin does not support the
	// configuration's cniVersion.
	ErrUnsupportedVersion = errors.New("ocicni: plugin does not support the config version")
	// ErrVersionFailed means a plugin binary failed to answer VERSION, or
	// did not answer in time. It is not asked again until it changes.
	ErrVersionFailed = errors.New("ocicni: plugin VERSION failed")
	// ErrVersionPending means a plugin binary has not answered VERSION
	// yet; its network is loaded by the load that follows the answer.
	ErrVersionPending = errors.New("ocicni: plugin VERSION has not answered yet")
)

// ConfigError explains why a configuration file was skipped. Err wraps
// one of [ErrInvalidConfig], [ErrPluginNotFound], [ErrUnsupportedVersion],
// [ErrVersionFailed] or [ErrVersionPending]. A file that could not be read
// safely wraps ErrInvalidConfig and [fsutil.ErrNotRegular] or
// [fsutil.ErrTooLarge].
type ConfigError struct {
	File    string
	Network string // empty when the file could not be parsed far enough
	Err     error
}

func (e *ConfigError) Error() string {
	if e.Network != "" {
		return fmt.Sprintf("config file %s (network %q) skipped: %v", e.File, e.Network, e.Err)
	}
	return fmt.Sprintf("config file %s skipped: %v", e.File, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// NetworkNotFoundError is returned when a requested network is not loaded.
// Skipped lists the files that declare that network but were skipped, with
// the reason. It satisfies errors.Is(err, ErrNetworkNotFound).
type NetworkNotFoundError struct {
	Network string
	ConfDir string // the conf dir, or "memory" when the configs are held in memory
	Skipped []*ConfigError
}

func (e *NetworkNotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ocicni: network %q not found in %s", e.Network, e.ConfDir)
	for _, s := range e.Skipped {
		b.WriteString("; ")
		b.WriteString(s.Error())
	}
	return b.String()
}

// Unwrap returns ErrNetworkNotFound and every skip reason.
func (e *NetworkNotFoundError) Unwrap() []error {
	errs := []error{ErrNetworkNotFound}
	for _, s := range e.Skipped {
		errs = append(errs, s)
	}
	return errs
}

// Skip reasons, as [SkipReason] names them.
const (
	SkipPluginNotFound     = "plugin_not_found"
	SkipUnsupportedVersion = "unsupported_version"
	SkipVersionFailed      = "version_failed"
	SkipVersionPending     = "version_pending"
	SkipInvalid            = "invalid"
)

// SkipReason names why a file was skipped, from its [ConfigError]'s Err:
// a word from a small fixed set, fit for a metric's attribute.
func SkipReason(err error) string {
	switch {
	case errors.Is(err, ErrPluginNotFound):
		return SkipPluginNotFound
	case errors.Is(err, ErrUnsupportedVersion):
		return SkipUnsupportedVersion
	case errors.Is(err, ErrVersionFailed):
		return SkipVersionFailed
	case errors.Is(err, ErrVersionPending):
		return SkipVersionPending
	}
	return SkipInvalid
}
