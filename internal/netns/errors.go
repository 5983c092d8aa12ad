package netns

import "errors"

// ErrUnsupported is returned, off Linux, by every operation that enters a
// network namespace.
var ErrUnsupported = errors.New("ocicni: network namespaces are only supported on Linux")
