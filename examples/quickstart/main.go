// Command quickstart attaches a fresh network namespace to a bridge network
// with ocicni, pings the gateway from inside it, detaches it again and
// checks that nothing was left behind.
//
// Run it as root from the repository root on a machine that has Go:
//
//	sudo go run ./examples/quickstart
//
// It builds the reference CNI plugins from the tools module into a
// temporary directory (pass -bin-dir to use plugins you already have),
// writes the bundled network configuration, 10-quickstart.conflist, to a
// temporary conf dir, and keeps its CNI cache and IPAM reservations in
// temporary directories too, so it touches neither /etc/cni nor
// /var/lib/cni. It removes everything it created before it exits, and exits
// non-zero if any step or check fails.
//
// The program uses only ocicni's public packages, pkg/ocicni and pkg/cache.
// The namespace and link helpers it needs are in netns_linux.go, so it can
// be copied out of the repository into a module of its own; there, pass
// -bin-dir, since the plugins are built from the repository's tools module.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

func main() {
	binDir := flag.String("bin-dir", "",
		"directory that holds the bridge and host-local plugins (default: build them from the repository's tools module)")
	flag.Parse()

	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "quickstart needs root: run with sudo")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *binDir)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nquickstart FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\nquickstart OK: the pod was attached, reached its gateway, and was detached without leftovers")
}

// run walks through a pod's network lifecycle. Every resource it creates is
// released by a deferred cleanup, in reverse order, also when a step fails.
func run(ctx context.Context, binDir string) (err error) {
	work, err := os.MkdirTemp("", "ocicni-quickstart-")
	if err != nil {
		return err
	}
	defer cleanup(&err, "removed "+work, func() error { return os.RemoveAll(work) })
	var (
		confDir  = filepath.Join(work, "net.d") // network configuration files
		cacheDir = filepath.Join(work, "cache") // libcni's result cache
		dataDir  = filepath.Join(work, "ipam")  // host-local's reservations
	)

	step("Writing the bundled network configuration")
	bundle, err := writeConflist(confDir, dataDir)
	if err != nil {
		return err
	}
	fmt.Printf("    %s: network %q, bridge %s, subnet %s\n", bundle.Path, bundle.Name, bundle.Bridge, bundle.Subnet)

	step("Locating the CNI plugins")
	if binDir, err = findPlugins(ctx, binDir, filepath.Join(work, "bin"), bundle.Types); err != nil {
		return err
	}

	hostBefore, err := hostLinks()
	if err != nil {
		return err
	}
	// The bridge plugin creates the bridge on first use and never deletes it.
	defer cleanup(&err, "deleted bridge "+bundle.Bridge, func() error { return deleteLink(bundle.Bridge) })

	step("Creating a network namespace")
	nsPath, err := newNetNS("ocicni-quickstart-" + randomHex(4))
	if err != nil {
		return err
	}
	defer cleanup(&err, "removed netns "+nsPath, func() error { return removeNetNS(nsPath) })
	fmt.Printf("    %s\n", nsPath)

	step("Creating the manager")
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	m, err := ocicni.New(
		ocicni.WithConfDir(confDir),
		ocicni.WithBinDirs(binDir),
		ocicni.WithCacheDir(cacheDir),
		ocicni.WithLogger(logrus.NewEntry(logger)),
	)
	if err != nil {
		return err
	}
	defer cleanup(&err, "shut down the manager", m.Shutdown)
	if name := m.GetDefaultNetworkName(); name != bundle.Name {
		return fmt.Errorf("default network is %q, want %q; skipped files: %v", name, bundle.Name, m.Skipped())
	}
	fmt.Printf("    conf dir %s, default network %q\n", confDir, bundle.Name)
	fmt.Printf("    bin dir  %s\n    cache    %s\n", binDir, cacheDir)

	pod := ocicni.PodNetwork{
		Name:      "quickstart",
		Namespace: "default",
		ID:        "quickstart-" + randomHex(6),
		UID:       randomHex(16),
		NetNS:     nsPath,
	}

	step("SetUpPodWithContext")
	fmt.Printf("    pod %s/%s, sandbox %s\n", pod.Namespace, pod.Name, pod.ID)
	results, err := m.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return fmt.Errorf("set up pod: %w", err) // a failed setup has already been rolled back
	}
	tornDown := false
	defer func() {
		if tornDown {
			return
		}
		// ctx may be cancelled already (Ctrl-C): tear down under a fresh one.
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cleanup(&err, "tore down the pod", func() error { return m.TearDownPodWithContext(tctx, pod) })
	}()
	att, err := printResults(results, bundle.Bridge)
	if err != nil {
		return err
	}

	step("Interfaces inside the netns")
	if err := printNetNS(nsPath, att); err != nil {
		return err
	}

	step("Pinging the gateway " + att.Gateway.String() + " from inside the netns")
	if err := ping(nsPath, att.Gateway, 3, 2*time.Second); err != nil {
		return err
	}

	step("GetPodNetworkStatusWithContext")
	if err := printStatus(ctx, m, pod, bundle.Bridge); err != nil {
		return err
	}

	step("TearDownPodWithContext")
	tornDown = true
	if err := m.TearDownPodWithContext(ctx, pod); err != nil {
		return fmt.Errorf("tear down pod: %w", err)
	}
	fmt.Println("    done")

	step("Checking that nothing was left behind")
	return verify(leftoverCheck{
		nsPath:     nsPath,
		hostBefore: hostBefore,
		bridge:     bundle.Bridge,
		att:        att,
		dataDir:    filepath.Join(dataDir, bundle.Name),
		cacheDir:   cacheDir,
	})
}

// printStatus asks the manager for the pod's network status, as a runtime
// does for a sandbox status query, and prints it like the setup results.
func printStatus(ctx context.Context, m *ocicni.Manager, pod ocicni.PodNetwork, bridge string) error {
	status, err := m.GetPodNetworkStatusWithContext(ctx, pod)
	if err != nil {
		return fmt.Errorf("pod network status: %w", err)
	}
	_, err = printResults(status, bridge)
	return err
}

var stepNum int

// step prints a numbered heading.
func step(title string) {
	stepNum++
	fmt.Printf("\n[%d] %s\n", stepNum, title)
}

// cleanup runs fn and, if it fails, adds its error to *errp. It is meant
// for defer.
func cleanup(errp *error, done string, fn func() error) {
	if err := fn(); err != nil {
		*errp = errors.Join(*errp, fmt.Errorf("cleanup: %w", err))
		fmt.Printf("    cleanup FAILED: %v\n", err)
		return
	}
	fmt.Printf("    cleanup: %s\n", done)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
