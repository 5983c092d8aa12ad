package ocicni

import (
	"context"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// typedExec wraps the configured invoke.Exec so that the failures libcni
// reports as plain text become typed: a binary missing from every bin dir
// wraps ErrPluginNotFound, and a plugin killed by an expired context wraps
// the context's error next to the plugin's own error. A context that is
// already done starts no plugin at all.
type typedExec struct {
	inner invoke.Exec
}

var _ invoke.Exec = typedExec{}

// rawExec is the part of invoke.Exec that finds and runs plugin binaries,
// which invoke.RawExec implements; see newRawExec.
type rawExec interface {
	ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error)
	FindInPath(plugin string, paths []string) (string, error)
}

// defaultExec is the executor used unless [WithExec] replaces it: what
// invoke.DefaultExec is, with this platform's rawExec in place of
// invoke.RawExec.
type defaultExec struct {
	rawExec
	version.PluginDecoder
}

var _ invoke.Exec = (*defaultExec)(nil)

func newDefaultExec() invoke.Exec {
	return &defaultExec{rawExec: newRawExec(os.Stderr)}
}

func (e typedExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, notStarted(err, pluginPath)
	}
	out, err := e.inner.ExecPlugin(ctx, pluginPath, stdinData, environ)
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return out, err
}

// notStarted is the error for a plugin not run because its context was
// already done. It wraps the context's error.
func notStarted(ctxErr error, pluginPath string) error {
	return fmt.Errorf("%w: plugin %s not started", ctxErr, pluginPath)
}

func (e typedExec) FindInPath(plugin string, paths []string) (string, error) {
	p, err := e.inner.FindInPath(plugin, paths)
	if err != nil {
		return "", fmt.Errorf("%w: %q in %v: %w", ErrPluginNotFound, plugin, paths, err)
	}
	return p, nil
}

func (e typedExec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return e.inner.Decode(jsonBytes)
}
