package names

import (
	"errors"
	"fmt"
)

// ErrInvalidName marks a network name, container ID or interface name
// that cannot safely become part of a file path, or that libcni would
// refuse. See [ValidateName]. Package cache re-exports it as
// cache.ErrInvalidName.
var ErrInvalidName = errors.New("cache: invalid name")

// InvalidNameError reports why a name was rejected. It unwraps to
// [ErrInvalidName]. Package cache re-exports it as cache.InvalidNameError,
// and uses it for the names of its own fields too (netns path, config
// digest).
type InvalidNameError struct {
	Field  string // [FieldNetwork], [FieldContainerID], [FieldIfName], or a field of package cache
	Value  string
	Reason string
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("cache: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns [ErrInvalidName].
func (e *InvalidNameError) Unwrap() error { return ErrInvalidName }
