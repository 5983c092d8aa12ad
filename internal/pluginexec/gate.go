package pluginexec

import "context"

// Gate holds back the plugin runs under a context that carries it (see
// [WithGate]) until it opens. A run that starts before the gate opens
// receives its config only once it has: [Exec] starts the plugin at once
// and holds back its stdin; an executor that cannot do that is to be
// called only once the gate is open (see [GatesStdin]). When the gate
// opens with an error, a plugin that was started is killed before it
// could read its config, and the run returns the gate's error.
type Gate struct {
	open chan struct{} // closed when the gate opens
	err  error         // set before open is closed
}

// NewGate returns a gate that is not open yet.
func NewGate() *Gate { return &Gate{open: make(chan struct{})} }

// Release opens the gate, with the error of the work it waited for. It
// must be called exactly once.
func (g *Gate) Release(err error) {
	g.err = err
	close(g.open)
}

// Wait returns the gate's error once it is open, or ctx's error when ctx
// ends first.
func (g *Gate) Wait(ctx context.Context) error {
	select {
	case <-g.open:
		return g.err
	case <-ctx.Done():
		select {
		case <-g.open: // opened as ctx ended
			return g.err
		default:
			return ctx.Err()
		}
	}
}

type gateKey struct{}

// WithGate returns ctx carrying g, for the plugin runs under it.
func WithGate(ctx context.Context, g *Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// GateOf returns the gate ctx carries when a run under ctx still has to
// wait for it: a gate that is not open, or that opened with an error.
// It returns nil when ctx carries none, or one that opened without error.
func GateOf(ctx context.Context) *Gate {
	g, _ := ctx.Value(gateKey{}).(*Gate)
	if g == nil {
		return nil
	}
	select {
	case <-g.open:
		if g.err == nil {
			return nil // open: nothing to wait for
		}
	default:
	}
	return g
}
