package ocicni

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/testenv"
	"github.com/seed-671fdd43/ocicni/internal/testplugins/calllog"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// itEnv is an integration environment: real plugins, a private conf dir,
// cache dir, host-local data dir and recorder log. With the bridges and
// subnets of testenv.Alloc and a netns per pod, nothing is shared between
// environments, so the tests that use one call t.Parallel.
type itEnv struct {
	t        *testing.T
	confDir  string
	cacheDir string
	dataDir  string
	logFile  string
	log      *test.Hook
	m        *Manager
	files    atomic.Int32
}

func newITEnv(t *testing.T) *itEnv {
	t.Helper()
	testenv.RequireRoot(t)
	require.NotEmpty(t, pluginDir, "plugins are built by TestMain")
	dir := t.TempDir()
	e := &itEnv{
		t:        t,
		confDir:  filepath.Join(dir, "net.d"),
		cacheDir: filepath.Join(dir, "cache"),
		dataDir:  filepath.Join(dir, "ipam"),
		logFile:  filepath.Join(dir, "calls.jsonl"),
	}
	require.NoError(t, os.MkdirAll(e.confDir, 0o755))
	return e
}

// start creates the manager (without a watcher unless opts add one).
func (e *itEnv) start(opts ...Option) *Manager {
	e.t.Helper()
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	e.log = hook
	// Healing is off unless a test turns it on with WithHealing, so that
	// the tests of other verbs count plugin calls that are all their own.
	base := []Option{
		WithConfDir(e.confDir), WithBinDirs(pluginDir), WithCacheDir(e.cacheDir),
		WithoutWatcher(), WithLogger(logrus.NewEntry(logger)), WithoutHealing(),
	}
	m, err := New(append(base, opts...)...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = m.Shutdown() })
	e.m = m
	return m
}

// managerLog is what the manager that start or restart made last has
// logged, a line an entry, for a failing test's report.
func (e *itEnv) managerLog() string {
	var b strings.Builder
	for _, entry := range e.log.AllEntries() {
		fmt.Fprintf(&b, "  %s %s %v\n", entry.Level, entry.Message, entry.Data)
	}
	return b.String()
}

// restart shuts the manager down and starts a new one on the same dirs.
func (e *itEnv) restart(opts ...Option) *Manager {
	e.t.Helper()
	require.NoError(e.t, e.m.Shutdown())
	return e.start(opts...)
}

// addConf writes a config file, .conflist for a list and .conf for a
// single plugin; files sort in the order they are added.
func (e *itEnv) addConf(name, content string) string {
	e.t.Helper()
	n := e.files.Add(1)
	ext := ".conf"
	if strings.Contains(content, `"plugins"`) {
		ext = ".conflist"
	}
	return testenv.WriteFile(e.t, e.confDir, fmt.Sprintf("%02d-%s%s", n*10, name, ext), content)
}

// bridgeNet writes a bridge+host-local network with optional extra plugins.
func (e *itEnv) bridgeNet(name, version string, extra ...string) testenv.Net {
	e.t.Helper()
	n := testenv.Alloc(e.t)
	e.addConf(name, testenv.BridgeConflist(name, version, n, e.dataDir, extra...))
	return n
}

// recorder returns a recorder plugin config logging to the env's log.
func (e *itEnv) recorder(name, version string, extra map[string]any) string {
	return testenv.RecorderConf(name, version, e.logFile, extra)
}

func (e *itEnv) calls(verb string) []calllog.Call {
	e.t.Helper()
	calls, err := calllog.Read(e.logFile)
	require.NoError(e.t, err)
	if verb == "" {
		return calls
	}
	return calllog.Filter(calls, verb)
}

// callNetworks lists the networks of the recorded calls of one verb.
func (e *itEnv) callNetworks(verb string) []string {
	var out []string
	for _, c := range e.calls(verb) {
		out = append(out, c.Network)
	}
	return out
}

func (e *itEnv) pod(name string) PodNetwork {
	e.t.Helper()
	return PodNetwork{
		Name: name, Namespace: "test", UID: "uid-" + name,
		ID: "ctr-" + randHex(e.t), NetNS: testenv.NewNS(e.t),
	}
}

func (e *itEnv) cacheFiles() []string {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.cacheDir, "results"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(e.t, err)
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	return out
}

func (e *itEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// assertClean checks that nothing of the pod is left: no interfaces but lo
// in the netns, no reservations, no cache entries, no order record.
func (e *itEnv) assertClean(pod PodNetwork, networks ...string) {
	e.t.Helper()
	if _, err := os.Stat(pod.NetNS); err == nil {
		assert.Equal(e.t, []string{"lo"}, linksIn(e.t, pod.NetNS), "only lo is left in the netns")
	}
	for _, n := range networks {
		assert.Empty(e.t, testenv.Reservations(e.t, e.dataDir, n), "host-local reservations of %s", n)
	}
	assert.Empty(e.t, e.cacheFiles(), "cache entries")
	order, err := e.m.diskCache().ReadOrder(pod.ID)
	require.NoError(e.t, err)
	assert.Nil(e.t, order, "order record")
}

func linksIn(t *testing.T, nsPath string) []string {
	t.Helper()
	var names []string
	require.NoError(t, netnsDo(nsPath, func() error {
		ifaces, err := net.Interfaces()
		for _, i := range ifaces {
			names = append(names, i.Name)
		}
		return err
	}))
	return names
}

func hostLinks(t *testing.T) map[string]bool {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, i := range ifaces {
		out[i.Name] = true
	}
	return out
}

// resultIPs returns the CIDRs of a result, converted to 1.0.0.
func resultIPs(t *testing.T, r NetResult) []string {
	t.Helper()
	var out []string
	for _, ip := range mustCurrent(t, r.Result).IPs {
		out = append(out, ip.Address.String())
	}
	return out
}

func randHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// diskCache opens the manager's cache dir as package cache does, for
// tests that read or rewrite its files directly, as a tool would.
func (m *Manager) diskCache() *cache.Cache { return cache.New(m.e.store.led.Dir()) }
