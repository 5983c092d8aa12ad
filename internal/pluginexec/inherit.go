package pluginexec

import (
	"context"
	"os"
)

type inheritKey struct{}

// WithInherited returns ctx marking the plugin runs under it to inherit
// f, as file descriptor 3: a held lock file, so that the plugin holds
// the lock as long as it runs, even when the caller dies first (flock
// locks belong to the open file, which the plugin's copy keeps open).
// The executor of [NewRaw] honours it on unix; invoke.RawExec does not.
// f must stay open while runs under ctx may start.
func WithInherited(ctx context.Context, f *os.File) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, inheritKey{}, f)
}

// inheritedOf returns the files the runs under ctx inherit.
func inheritedOf(ctx context.Context) []*os.File {
	if f, _ := ctx.Value(inheritKey{}).(*os.File); f != nil {
		return []*os.File{f}
	}
	return nil
}
