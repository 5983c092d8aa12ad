package pluginexec

import (
	"context"
	"fmt"
	"io"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// Raw is the part of invoke.Exec that finds and runs plugin binaries,
// which invoke.RawExec implements; see [NewRaw].
type Raw interface {
	ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error)
	FindInPath(plugin string, paths []string) (string, error)
}

// Exec is what invoke.DefaultExec is, with this platform's [Raw] (see
// [NewRaw]) in place of invoke.RawExec.
type Exec struct {
	Raw
	version.PluginDecoder
}

var _ invoke.Exec = (*Exec)(nil)

// New returns the executor that runs plugins with [NewRaw], their stderr
// copied to stderr (nil: dropped).
func New(stderr io.Writer) *Exec {
	return &Exec{Raw: NewRaw(stderr)}
}

// GatesStdin reports whether e holds back a plugin's stdin until the
// [Gate] of its context opens, so that the plugin may start before. Only
// an [Exec] over this platform's [NewRaw] does, where it kills a plugin's
// process group (unix). Any other executor is to be called only once the
// gate is open.
func GatesStdin(e invoke.Exec) bool {
	d, ok := e.(*Exec)
	return ok && rawGatesStdin(d.Raw)
}

// NotStarted is the error for a plugin not run because its context was
// already done. It wraps ctxErr, the context's error.
func NotStarted(ctxErr error, pluginPath string) error {
	return fmt.Errorf("%w: plugin %s not started", ctxErr, pluginPath)
}

// LowNice is the nice value (CPU priority, 19 lowest) at which the plugins
// of a context marked by [WithLowPriority] run.
const LowNice = 19

type lowPriorityKey struct{}

// WithLowPriority returns ctx marking the plugin runs under it to run at
// the lowest CPU priority: nice [LowNice], and on Linux SCHED_IDLE too,
// in every thread from the first (see StartLowPriority). A plugin's own
// children inherit the priority. The executor of [NewRaw] honours it
// where it runs plugins in process groups (unix); invoke.RawExec does
// not.
func WithLowPriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, lowPriorityKey{}, true)
}
