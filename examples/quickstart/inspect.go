package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// attachment is what the quickstart remembers from the setup result.
type attachment struct {
	Ifname    string     // interface in the netns
	IP        *net.IPNet // its IPv4 address
	Gateway   net.IP
	HostVeths []string // host-side ends of the veth pairs
}

// printResults prints each network's interfaces and IPs and returns the
// first IPv4 attachment. bridge is left out of the host-side interfaces.
func printResults(results []ocicni.NetResult, bridge string) (*attachment, error) {
	var att *attachment
	for _, r := range results {
		res, err := current.NewResultFromResult(r.Result)
		if err != nil {
			return nil, fmt.Errorf("network %s: convert result: %w", r.Name, err)
		}
		fmt.Printf("    network %q, ifname %s (CNI %s)\n", r.Name, r.Ifname, r.Result.Version())
		var veths []string
		for i, iface := range res.Interfaces {
			where := "host"
			if iface.Sandbox != "" {
				where = "netns " + iface.Sandbox
			} else if iface.Name != bridge {
				veths = append(veths, iface.Name)
			}
			fmt.Printf("      interface[%d] %-14s mac %s  (%s)\n", i, iface.Name, iface.Mac, where)
		}
		for _, ip := range res.IPs {
			on := ""
			if ip.Interface != nil {
				on = fmt.Sprintf(" on interface[%d]", *ip.Interface)
			}
			fmt.Printf("      ip %-18s gateway %v%s\n", ip.Address.String(), ip.Gateway, on)
			if att == nil && ip.Address.IP.To4() != nil {
				addr := ip.Address
				att = &attachment{Ifname: r.Ifname, IP: &addr, Gateway: ip.Gateway}
			}
		}
		if att != nil && att.HostVeths == nil {
			att.HostVeths = veths
		}
	}
	if att == nil || att.Gateway == nil {
		return nil, errors.New("the result has no IPv4 address with a gateway")
	}
	return att, nil
}

// printNetNS lists the interfaces and addresses inside the netns, as the
// kernel reports them, and checks that the attached one has its address.
func printNetNS(nsPath string, att *attachment) error {
	found := false
	err := inNetNS(nsPath, func() error {
		ifaces, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, iface := range ifaces {
			addrs, err := linkAddrs(iface.Name)
			if err != nil {
				return err
			}
			var list []string
			for _, a := range addrs {
				list = append(list, a.String())
				found = found || (iface.Name == att.Ifname && a.String() == att.IP.String())
			}
			fmt.Printf("    %-6s %-40s <%s>\n", iface.Name, strings.Join(list, " "), iface.Flags)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("inspect netns: %w", err)
	}
	if !found {
		return fmt.Errorf("%s has no address %s inside the netns", att.Ifname, att.IP)
	}
	return nil
}

// hostLinks returns the names of the interfaces in the host namespace.
func hostLinks() ([]string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ifaces))
	for _, iface := range ifaces {
		names = append(names, iface.Name)
	}
	return names, nil
}

// leftoverCheck holds what verify compares.
type leftoverCheck struct {
	nsPath     string
	hostBefore []string // host interfaces before setup
	bridge     string   // allowed to outlive teardown; deleted at cleanup
	att        *attachment
	dataDir    string // host-local's directory for the network
	cacheDir   string
}

// verify checks, after teardown, that the interfaces, the IPAM reservation
// and the cache entries the setup created are all gone.
func verify(c leftoverCheck) error {
	var failed []string
	report := func(what string, left []string, err error) {
		switch {
		case err != nil:
			fmt.Printf("    FAIL  %s: %v\n", what, err)
			failed = append(failed, what)
		case len(left) > 0:
			fmt.Printf("    FAIL  %s: left behind %s\n", what, strings.Join(left, ", "))
			failed = append(failed, what)
		default:
			fmt.Printf("    ok    %s\n", what)
		}
	}

	var inNS []string
	err := inNetNS(c.nsPath, func() error {
		links, err := hostLinks() // in the netns, despite the name
		inNS = slices.DeleteFunc(links, func(n string) bool { return n == "lo" })
		return err
	})
	report("only lo remains in the netns ("+c.att.Ifname+" is gone)", inNS, err)

	var veths []string
	var vethErr error
	for _, v := range c.att.HostVeths {
		ok, err := linkExists(v)
		vethErr = errors.Join(vethErr, err)
		if ok {
			veths = append(veths, v)
		}
	}
	report("host-side veth "+strings.Join(c.att.HostVeths, ", ")+" removed", veths, vethErr)

	// Compare the host's interfaces with those before setup. Containers
	// or tests elsewhere on the host may add interfaces meanwhile, so only
	// the ones plugged into our bridge count as leftovers.
	after, err := hostLinks()
	var added []string
	for _, name := range after {
		if name == c.bridge || slices.Contains(c.hostBefore, name) {
			continue
		}
		if master, _ := os.Readlink("/sys/class/net/" + name + "/master"); filepath.Base(master) == c.bridge {
			added = append(added, name)
		} else {
			fmt.Printf("    note  %s appeared on the host meanwhile, not on %s: not ours\n", name, c.bridge)
		}
	}
	ports, perr := os.ReadDir("/sys/class/net/" + c.bridge + "/brif")
	for _, p := range ports {
		if !slices.Contains(added, p.Name()) {
			added = append(added, p.Name())
		}
	}
	if errors.Is(perr, fs.ErrNotExist) {
		perr = nil // no bridge, no ports
	}
	report("no new host interfaces, and no ports left on bridge "+c.bridge, added, errors.Join(err, perr))

	reserved, err := filesIn(c.dataDir, func(name string) bool { return net.ParseIP(name) != nil })
	report("host-local released "+c.att.IP.IP.String()+" (no reservations in "+c.dataDir+")", reserved, err)

	store := cache.New(c.cacheDir)
	results, err := filesIn(store.ResultsDir(), nil)
	report("no cached results in "+store.ResultsDir(), results, err)
	orders, err := filesIn(store.OrdersDir(), func(name string) bool { return !cache.IsSpareFile(name) })
	report("no attachment-order records in "+store.OrdersDir(), orders, err)

	if len(failed) > 0 {
		return fmt.Errorf("teardown left things behind: %s", strings.Join(failed, "; "))
	}
	return nil
}

// filesIn lists the regular files in dir whose names keep accepts (all of
// them when keep is nil). A missing dir holds no files.
func filesIn(dir string, keep func(string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && (keep == nil || keep(e.Name())) {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	return names, nil
}
