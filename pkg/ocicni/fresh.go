package ocicni

import (
	"bytes"
	"sync"
	"time"
)

// defaultFreshWindow is how long after this manager's ADD of an
// attachment a status of it answers from the ADD's result (see
// [freshAdds]).
const defaultFreshWindow = 5 * time.Second

// maxFresh bounds the attachments freshAdds holds; past it, those older
// than the window are dropped at the next add.
const maxFresh = 1024

// freshAdds remembers, for a short window, the attachments this manager
// has just added, so that a status of the sandbox right after its setup
// (CRI-O asks for one within the same RunPodSandbox) answers from the
// ADD's result without running CHECK: the same plugins just ran ADD with
// the same config, under the same sandbox lock sequence, and succeeded;
// CHECK would prove again, a few milliseconds later, that what they made
// is still there. What it could prove that the ADD did not is only that
// nothing removed it in between: a process outside the library deleting
// the interface, or a plugin's own state, in that window. Where that
// matters, [WithStatusAlwaysChecks] turns this off. A teardown or a forget
// of the sandbox ends its window at once.
//
// mu is a leaf lock.
type freshAdds struct {
	window time.Duration // 0: off
	mu     sync.Mutex
	added  map[string][]freshAdd // by sandbox ID
}

// freshAdd is one ADD: its attachment, when it succeeded, and the config
// it ran with.
type freshAdd struct {
	network, ifname string
	at              time.Time
	config          []byte
}

func newFreshAdds(window time.Duration) *freshAdds {
	return &freshAdds{window: window, added: map[string][]freshAdd{}}
}

// add remembers that p's ADD of sandbox id succeeded now.
func (f *freshAdds) add(id string, p *plan) {
	if f.window <= 0 || p.list == nil {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.added) >= maxFresh {
		for k, as := range f.added {
			if now.Sub(as[len(as)-1].at) >= f.window {
				delete(f.added, k)
			}
		}
		if len(f.added) >= maxFresh {
			return // a status then runs CHECK, as without the window
		}
	}
	as := f.added[id]
	for i := range as {
		if as[i].network == p.Name && as[i].ifname == p.Ifname {
			as = append(as[:i], as[i+1:]...)
			break
		}
	}
	f.added[id] = append(as, freshAdd{network: p.Name, ifname: p.Ifname, at: now, config: p.list.Bytes})
}

// fresh reports whether p's attachment of sandbox id was added by this
// manager within the window, with p's config.
func (f *freshAdds) fresh(id string, p *plan) bool {
	if f.window <= 0 || p.list == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.added[id] {
		if a.network == p.Name && a.ifname == p.Ifname {
			return time.Since(a.at) < f.window && bytes.Equal(a.config, p.list.Bytes)
		}
	}
	return false
}

// forget ends the window of every attachment of sandbox id.
func (f *freshAdds) forget(id string) {
	if f.window <= 0 {
		return
	}
	f.mu.Lock()
	delete(f.added, id)
	f.mu.Unlock()
}
