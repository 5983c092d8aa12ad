// Command metrics exports ocicni's metrics to Prometheus. It gives the
// manager an OpenTelemetry SDK meter provider whose reader is the
// Prometheus exporter, serves the exporter's registry on a loopback port,
// sets up one pod in a fresh network namespace, tears it down, runs GC,
// and then scrapes its own /metrics over HTTP and prints the cni_*
// families.
//
// It is a Go module of its own, so that the SDK and the Prometheus client
// never enter the library's go.mod. Run it as root from its directory:
//
//	cd examples/metrics && sudo go run .
//
// It builds the reference CNI plugins from the repository's tools module
// into a temporary directory (pass -bin-dir to use plugins you already
// have, such as those "make plugins" puts in bin/plugins), and keeps its
// conf dir, CNI cache and IPAM reservations in temporary directories, so
// it touches neither /etc/cni nor /var/lib/cni. It serves /metrics on
// 127.0.0.1 at a free port (-listen to choose one), removes everything it
// created (the netns, the bridge, the temporary directories) before it
// exits, and exits non-zero if any step fails.
//
// The program uses only ocicni's public package pkg/ocicni. The namespace
// and link helpers it needs are in netns_linux.go (copied from
// examples/quickstart), so it can be copied out of the repository into a
// module of its own; there, pass -bin-dir, since the plugins are built
// from the repository's tools module.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

func main() {
	binDir := flag.String("bin-dir", "",
		"directory that holds the bridge and host-local plugins (default: build them from the repository's tools module)")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /metrics on (port 0: a free port)")
	flag.Parse()

	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "metrics needs root: run with sudo")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, config{binDir: *binDir, listen: *listen}, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nmetrics FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\nmetrics OK: the pod was set up and torn down, GC ran, and the scrape shows it")
}

// config is what run takes from the command line.
type config struct {
	binDir string // plugins; empty: build them
	listen string // where to serve /metrics; empty: 127.0.0.1:0
}

// run does the example's work, printing its steps and the cni_* families
// of the scrape to w, and returns the whole scrape in the Prometheus text
// format. Every resource it creates is released by a deferred cleanup, in
// reverse order, also when a step fails.
func run(ctx context.Context, cfg config, w io.Writer) (scrape []byte, err error) {
	p := &printer{w: w}
	cleanup := p.cleanup(&err)

	work, err := os.MkdirTemp("", "ocicni-metrics-")
	if err != nil {
		return nil, err
	}
	defer cleanup("removed "+work, func() error { return os.RemoveAll(work) })
	var (
		confDir  = filepath.Join(work, "net.d") // network configuration files
		cacheDir = filepath.Join(work, "cache") // libcni's result cache
		dataDir  = filepath.Join(work, "ipam")  // host-local's reservations
	)

	p.step("Writing the network configuration")
	bundle, err := writeConflist(confDir, dataDir)
	if err != nil {
		return nil, err
	}
	p.printf("    %s: network %q, bridge %s\n", bundle.Path, bundle.Name, bundle.Bridge)

	p.step("Locating the CNI plugins")
	binDir, err := findPlugins(ctx, w, cfg.binDir, filepath.Join(work, "bin"), bundle.Types)
	if err != nil {
		return nil, err
	}

	p.step("Serving the Prometheus exporter's registry")
	// A registry of its own, not prometheus.DefaultRegisterer: only the
	// exporter's families are in it, and two runs in one process (tests)
	// do not collide.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer cleanup("shut down the meter provider", func() error {
		return provider.Shutdown(context.WithoutCancel(ctx))
	})
	url, stopServer, err := serveMetrics(cfg.listen, registry)
	if err != nil {
		return nil, err
	}
	defer cleanup("stopped the metrics server", stopServer)
	p.printf("    %s\n", url)

	// The bridge plugin creates the bridge on first use and never deletes it.
	defer cleanup("deleted bridge "+bundle.Bridge, func() error { return deleteLink(bundle.Bridge) })

	p.step("Creating a network namespace")
	nsPath, err := newNetNS("ocicni-metrics-" + randomHex(4))
	if err != nil {
		return nil, err
	}
	defer cleanup("removed netns "+nsPath, func() error { return removeNetNS(nsPath) })
	p.printf("    %s\n", nsPath)

	p.step("Creating the manager, with the meter provider")
	logger := logrus.New()
	logger.SetOutput(w)
	logger.SetLevel(logrus.WarnLevel)
	m, err := ocicni.New(
		ocicni.WithConfDir(confDir),
		ocicni.WithBinDirs(binDir),
		ocicni.WithCacheDir(cacheDir),
		ocicni.WithLogger(logrus.NewEntry(logger)),
		ocicni.WithMeterProvider(provider),
	)
	if err != nil {
		return nil, err
	}
	defer cleanup("shut down the manager", m.Shutdown)
	if err := waitForDefault(ctx, m, bundle.Name); err != nil {
		return nil, err
	}

	pod := ocicni.PodNetwork{
		Name:      "metrics",
		Namespace: "default",
		ID:        "metrics-" + randomHex(6),
		UID:       randomHex(16),
		NetNS:     nsPath,
	}

	p.step("SetUpPodWithContext")
	results, err := m.SetUpPodWithContext(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("set up pod: %w", err) // a failed setup has already been rolled back
	}
	tornDown := false
	defer func() {
		if tornDown {
			return
		}
		// ctx may be cancelled already (Ctrl-C): tear down under a fresh one.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		cleanup("tore down the pod", func() error { return m.TearDownPodWithContext(tctx, pod) })
	}()
	for _, r := range results {
		p.printf("    pod %s/%s on network %q, ifname %s\n", pod.Namespace, pod.Name, r.Name, r.Ifname)
	}

	p.step("TearDownPodWithContext")
	tornDown = true
	if err := m.TearDownPodWithContext(ctx, pod); err != nil {
		return nil, fmt.Errorf("tear down pod: %w", err)
	}
	p.printf("    done\n")

	p.step("GC, with no valid pods")
	// The cache dir is this program's own, so GC can act only on what this
	// program created: nothing, since the pod is torn down.
	outcomes, err := m.GCOutcomes(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("GC: %w", err)
	}
	p.printf("    done: %d stale attachments\n", len(outcomes))

	p.step("Scraping " + url)
	scrape, err = fetch(ctx, url)
	if err != nil {
		return nil, err
	}
	p.printf("%s", cniFamilies(scrape))
	return scrape, nil
}

// waitForDefault waits until name is the manager's default network. New
// publishes a network only once its plugin answered VERSION, and waits for
// that answer a second at most: on a busy machine, a later load (the
// watcher's) publishes it.
func waitForDefault(ctx context.Context, m *ocicni.Manager, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for m.GetDefaultNetworkName() != name {
		select {
		case <-ctx.Done():
			return fmt.Errorf("default network is %q, want %q; skipped files: %v: %w",
				m.GetDefaultNetworkName(), name, m.Skipped(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// serveMetrics serves registry at /metrics on a listener at addr and
// returns the URL to scrape and a function that stops the server.
func serveMetrics(addr string, registry *prometheus.Registry) (url string, stop func() error, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	// HTTPErrorOnError: a failed collection is a 500, not a partial scrape.
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	return "http://" + ln.Addr().String() + "/metrics", stop, nil
}

// fetch GETs url, in the Prometheus text format, and returns the body.
func fetch(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	// No proxy: the server is on this machine.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape: read body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// cniFamilies returns the lines of a text-format scrape that belong to
// the cni_* families: their HELP and TYPE comments and their samples.
func cniFamilies(scrape []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(scrape))
	sc.Buffer(nil, len(scrape)+1)
	for sc.Scan() {
		line := sc.Text()
		name := line
		for _, comment := range []string{"# HELP ", "# TYPE "} {
			name = strings.TrimPrefix(name, comment)
		}
		if strings.HasPrefix(name, "cni_") {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// printer prints numbered steps and cleanups to w.
type printer struct {
	w io.Writer
	n int // steps so far
}

func (p *printer) printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }

// step prints a numbered heading.
func (p *printer) step(title string) {
	p.n++
	p.printf("\n[%d] %s\n", p.n, title)
}

// cleanup returns a function that runs fn and, if it fails, adds its
// error to *errp. It is meant for defer.
func (p *printer) cleanup(errp *error) func(done string, fn func() error) {
	return func(done string, fn func() error) {
		if err := fn(); err != nil {
			*errp = errors.Join(*errp, fmt.Errorf("cleanup: %w", err))
			p.printf("    cleanup FAILED: %v\n", err)
			return
		}
		p.printf("    cleanup: %s\n", done)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
