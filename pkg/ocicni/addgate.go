package ocicni

import "context"

// addGate holds back a setup's first ADD until the setup is ready for
// it: lo is up in the netns and the attachments are recorded durably.
// The setup does that work while the first plugin process starts, since
// starting a process takes longer; but no plugin receives its config, on
// stdin, before the gate opens, and a plugin cannot act on a network
// without it. When the work fails, the gate opens with the error: the
// plugin is killed without having read a config, and the setup fails with
// nothing attached, as if no plugin had started.
//
// The default executor (groupExec) starts the plugin and waits at its
// stdin; any other executor is called only once the gate is open (see
// managedExec).
type addGate struct {
	open chan struct{} // closed when the gate opens
	err  error         // set before open is closed
}

func newAddGate() *addGate { return &addGate{open: make(chan struct{})} }

// release opens the gate, with the error of the work it waited for.
func (g *addGate) release(err error) {
	g.err = err
	close(g.open)
}

// wait returns the gate's error once it is open, or ctx's error when ctx
// ends first.
func (g *addGate) wait(ctx context.Context) error {
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

type addGateKey struct{}

// withAddGate returns ctx carrying g, for the plugin runs under it.
func withAddGate(ctx context.Context, g *addGate) context.Context {
	return context.WithValue(ctx, addGateKey{}, g)
}

// addGateOf returns the gate ctx carries that is not yet open, or nil.
func addGateOf(ctx context.Context) *addGate {
	g, _ := ctx.Value(addGateKey{}).(*addGate)
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
