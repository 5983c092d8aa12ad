//go:build !unix

package ocicni

import (
	"io"

	"github.com/containernetworking/cni/pkg/invoke"
)

// newRawExec returns invoke.RawExec: without process groups, only the
// plugin itself is killed when the context is done.
func newRawExec(stderr io.Writer) rawExec {
	return &invoke.RawExec{Stderr: stderr}
}
