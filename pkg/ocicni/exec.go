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
// the context's error next to the plugin's own error.
type typedExec struct {
	inner invoke.Exec
}

var _ invoke.Exec = typedExec{}

func newDefaultExec() invoke.Exec {
	return &invoke.DefaultExec{
		RawExec:       &invoke.RawExec{Stderr: os.Stderr},
		PluginDecoder: version.PluginDecoder{},
	}
}

func (e typedExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	out, err := e.inner.ExecPlugin(ctx, pluginPath, stdinData, environ)
	if err != nil && ctx.Err() != nil {
		return out, fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return out, err
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
