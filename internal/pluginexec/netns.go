package pluginexec

import (
	"context"
	"os"
)

type netnsKey struct{}

// WithNetNS returns ctx marking the plugin runs under it to start in the
// network namespace that ns, an open handle of one, names, whatever
// thread the run is called on: the plugin's process, and the links and
// rules it creates on its host side, are in that namespace. The executor
// of [NewRaw] honours it on Linux; elsewhere, and in invoke.RawExec, a
// plugin starts in the calling thread's namespace. ns must stay open
// while runs under ctx may start.
func WithNetNS(ctx context.Context, ns *os.File) context.Context {
	if ns == nil {
		return ctx
	}
	return context.WithValue(ctx, netnsKey{}, ns)
}

// netNSOf returns the handle of [WithNetNS], or nil.
func netNSOf(ctx context.Context) *os.File {
	ns, _ := ctx.Value(netnsKey{}).(*os.File)
	return ns
}
