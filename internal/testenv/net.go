package testenv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-671fdd43/ocicni/internal/netns"
)

// counterDir holds the machine-wide counter behind [Alloc]. It is shared by
// every user, so it is world-writable with the sticky bit.
const counterDir = "/tmp/ocicni-testenv"

// netSlots is how many distinct networks [Alloc] hands out before it wraps:
// 50 second octets times 250 third octets.
const netSlots = 50 * 250

// Net is a test network that no other test process on the machine holds.
type Net struct {
	// N is the allocation number, in [0, 12500).
	N int
	// Bridge is the bridge name, "ocit<N>".
	Bridge string
	// Subnet is 10.(200+N/250).(N%250).0/24.
	Subnet string
	// Gateway is the .1 address of Subnet, without a prefix length.
	Gateway string
	// RangeStart and RangeEnd bound the addresses handed to containers
	// (.2 to .254).
	RangeStart, RangeEnd string
}

// Alloc returns a network distinct from those of every other Alloc call on
// this machine, across processes, until 12500 allocations wrap around. As
// root it deletes a stale bridge of the same name first. It registers a
// cleanup that deletes the bridge from the host namespace.
func Alloc(tb testing.TB) Net {
	tb.Helper()
	v, err := nextCounter()
	if err != nil {
		tb.Fatalf("testenv: allocate network: %v", err)
	}
	n := netFor(v % netSlots)
	if os.Geteuid() == 0 {
		if err := netns.DeleteLink(n.Bridge); err != nil {
			tb.Fatalf("testenv: delete stale bridge %s: %v", n.Bridge, err)
		}
	}
	tb.Cleanup(func() {
		if err := netns.DeleteLink(n.Bridge); err != nil {
			tb.Errorf("testenv: delete bridge %s: %v", n.Bridge, err)
		}
	})
	return n
}

// netFor derives the network for allocation number n.
func netFor(n int) Net {
	prefix := fmt.Sprintf("10.%d.%d.", 200+(n/250)%50, n%250)
	return Net{
		N:          n,
		Bridge:     "ocit" + strconv.Itoa(n),
		Subnet:     prefix + "0/24",
		Gateway:    prefix + "1",
		RangeStart: prefix + "2",
		RangeEnd:   prefix + "254",
	}
}

// nextCounter increments the counter file under an exclusive flock and
// returns its previous value.
func nextCounter() (int, error) {
	if err := os.Mkdir(counterDir, 0o777); err == nil {
		_ = os.Chmod(counterDir, 0o777|os.ModeSticky) // undo the umask
	} else if !errors.Is(err, fs.ErrExist) {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(counterDir, "counter"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	_ = f.Chmod(0o666) // only succeeds for the creator; undoes the umask
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return 0, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	buf := make([]byte, 32)
	k, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	v := 0
	if s := strings.TrimSpace(string(buf[:k])); s != "" {
		if v, err = strconv.Atoi(s); err != nil {
			return 0, fmt.Errorf("corrupt counter %s: %w", f.Name(), err)
		}
	}
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(v+1)+"\n"), 0); err != nil {
		return 0, err
	}
	return v, nil
}

// NewNS creates a network namespace and registers its removal. The test
// must run as root.
func NewNS(tb testing.TB) string {
	tb.Helper()
	path, err := netns.New()
	if err != nil {
		tb.Fatalf("testenv: new netns: %v", err)
	}
	tb.Cleanup(func() {
		if err := netns.Remove(path); err != nil {
			tb.Errorf("testenv: remove netns %s: %v", path, err)
		}
	})
	return path
}

// AddrsIn returns the addresses, in CIDR form and sorted, of the interface
// ifname inside the namespace at nsPath. IPv6 link-local addresses are left
// out, because the kernel adds them asynchronously. It returns nil if the
// interface does not exist, and an empty slice if it has no addresses.
func AddrsIn(tb testing.TB, nsPath, ifname string) []string {
	tb.Helper()
	var out []string
	err := netns.Do(nsPath, func() error {
		ifaces, err := net.Interfaces()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ifaces, func(x net.Interface) bool { return x.Name == ifname })
		if i < 0 {
			return nil
		}
		addrs, err := ifaces[i].Addrs()
		if err != nil {
			return err
		}
		out = []string{}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			out = append(out, a.String())
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("testenv: addresses of %s in %s: %v", ifname, nsPath, err)
	}
	slices.Sort(out)
	return out
}
