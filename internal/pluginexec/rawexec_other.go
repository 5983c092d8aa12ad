//go:build !unix

package pluginexec

import (
	"io"

	"github.com/containernetworking/cni/pkg/invoke"
)

// NewRaw returns invoke.RawExec: without process groups, only the plugin
// itself is killed when the context is done, and [WithLowPriority] has no
// effect.
func NewRaw(stderr io.Writer) Raw {
	return &invoke.RawExec{Stderr: stderr}
}

// rawGatesStdin reports false: invoke.RawExec is to be called only once
// the Gate is open (see GatesStdin).
func rawGatesStdin(Raw) bool { return false }
