package fakecni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
)

// NewNetNS creates an empty regular file dir/name to stand in for a pod's
// netns path, and returns its absolute path. The manager's setup checks
// that a netns path exists and is not the host's namespace, which such a
// file passes; only the ocicni.NetNSOps would enter it, and a
// [Exec] does not. Remove the file to play a netns that is gone.
func NewNetNS(dir, name string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("fakecni: netns name %q must be a plain file name", name)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	return p, f.Close()
}

// FailLoopback makes LoopbackUp and LoopbackCheck fail with err, as when
// lo cannot be set up; nil makes them work again.
func (f *Exec) FailLoopback(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loErr = err
}

// LoopbackUp marks lo up in the fake netns at netnsPath, which must exist.
// It implements ocicni.NetNSOps.
func (f *Exec) LoopbackUp(_ context.Context, netnsPath string) error {
	if _, err := os.Stat(netnsPath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loErr != nil {
		return f.loErr
	}
	f.loUp[netnsPath] = true
	return nil
}

// LoopbackCheck returns an error unless LoopbackUp ran for netnsPath and
// the file is still there. It implements ocicni.NetNSOps.
func (f *Exec) LoopbackCheck(_ context.Context, netnsPath string) error {
	if _, err := os.Stat(netnsPath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loErr != nil {
		return f.loErr
	}
	if !f.loUp[netnsPath] {
		return errors.New("fakecni: loopback interface is down")
	}
	return nil
}

// InterfaceAddrs returns the MAC and global addresses that the last
// successful ADD reported for ifname in netnsPath, unless a DEL for the
// container's ifname succeeded since. It implements ocicni.NetNSOps;
// the manager calls it for status of an attachment without a cached
// result.
func (f *Exec) InterfaceAddrs(_ context.Context, netnsPath, ifname string) (net.HardwareAddr, []*net.IPNet, error) {
	if _, err := os.Stat(netnsPath); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.live[liveKey{netnsPath, ifname}]
	if !ok || len(a.addrs) == 0 {
		return nil, nil, fmt.Errorf("fakecni: no addresses on %q in %s", ifname, netnsPath)
	}
	addrs := make([]*net.IPNet, len(a.addrs))
	for i, n := range a.addrs {
		addrs[i] = &net.IPNet{IP: slices.Clone(n.IP), Mask: slices.Clone(n.Mask)}
	}
	return slices.Clone(a.mac), addrs, nil
}

// LoopbackUps returns the netns paths whose lo LoopbackUp has set up,
// sorted.
func (f *Exec) LoopbackUps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.loUp))
	for p := range f.loUp {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
