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

// rawExecGatesStdin reports false: invoke.RawExec runs a plugin only once
// its addGate is open (see managedExec).
func rawExecGatesStdin(rawExec) bool { return false }
