package ocicni

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// treeFiles lists every regular file and symlink under root, relative.
func treeFiles(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	require.NoError(tb, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	}))
	return out
}

const fuzzID = "ctr1"

// FuzzTeardownAndGCFromCache writes arbitrary content into a cache entry
// and an attachment order record of container ctr1, then runs teardown by
// ID and GC on them. Invariants: no file outside the results and order
// directories is removed or created; every plugin ran with a container ID,
// ifname, network name and netns that pass a request's validation; nothing
// panics.
func FuzzTeardownAndGCFromCache(f *testing.F) {
	conf := base64.StdEncoding.EncodeToString([]byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"fake"}]}`))
	entry := func(network, id, ifname, netns, config string) []byte {
		return []byte(fmt.Sprintf(`{"kind":"cniCacheV1","containerId":%q,"config":%q,"ifName":%q,"networkName":%q,"netns":%q,"result":{"cniVersion":"1.0.0"}}`,
			id, config, ifname, network, netns))
	}
	record := func(network, ifname, netns string) []byte {
		return []byte(fmt.Sprintf(`{"kind":"ocicniOrderV1","containerId":"ctr1","attachments":[{"network":%q,"ifName":%q,"netns":%q}]}`,
			network, ifname, netns))
	}
	hostileConf := base64.StdEncoding.EncodeToString([]byte(`{"cniVersion":"1.0.0","name":"../../victim-name","plugins":[{"type":"fake"}]}`))
	f.Add(entry("net", fuzzID, "eth0", "/run/netns/x", conf), record("net", "eth0", "/run/netns/x"))
	f.Add(entry("net", fuzzID, "eth0/../../../victim-if", "", conf), record("net", "eth0", ""))
	f.Add(entry("net", fuzzID, "eth0", "", hostileConf), []byte(nil))
	f.Add(entry("net", "x/../../../victim-id", "eth0", "", conf), []byte(nil))
	f.Add(entry("../../victim-name", fuzzID, "eth0", "", conf), record("../../victim", "eth0", ""))
	f.Add(entry("net", fuzzID, "eth0", "/proc/thread-self/ns/net", conf), record("net", "eth1", "/proc/1/ns/net"))
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":`), record("net", "eth0/../x", "relative"))
	f.Add(entry("net", fuzzID, "eth0", "", conf)[:0], []byte(`{}`))
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"ctr1","ifName":"eth0","networkName":"net","result":{"cniVersion":"1.0.0","ips":[null],"interfaces":[null]}}`), []byte(nil))

	f.Fuzz(func(t *testing.T, entryData, recordData []byte) {
		root := t.TempDir()
		cacheDir := filepath.Join(root, "cache")
		confDir := filepath.Join(root, "net.d")
		binDir := filepath.Join(root, "bin")
		resultsDir := filepath.Join(cacheDir, "results")
		ordersDir := filepath.Join(cacheDir, "ocicni", "attachments")
		for _, d := range []string{confDir, binDir, resultsDir, ordersDir} {
			require.NoError(t, os.MkdirAll(d, 0o700))
		}
		writeConf(t, confDir, "10-net.conflist", `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"fake"}]}`)
		writeConf(t, confDir, "20-other.conflist", `{"cniVersion":"1.1.0","name":"other","plugins":[{"type":"fake"}]}`)
		// Victims where hostile names would point.
		for _, v := range []string{"victim-if", "victim-name-ctr1-eth0", "victim-id-eth0", "cache/victim"} {
			require.NoError(t, os.WriteFile(filepath.Join(root, v), []byte("keep"), 0o600))
		}
		require.NoError(t, os.WriteFile(filepath.Join(resultsDir, "net-ctr1-eth0"), entryData, 0o600))
		if recordData != nil {
			require.NoError(t, os.WriteFile(filepath.Join(ordersDir, fuzzID), recordData, 0o600))
		}
		isKept := func(rel string) bool {
			return !strings.HasPrefix(rel, filepath.Join("cache", "results")+"/") &&
				!strings.HasPrefix(rel, filepath.Join("cache", "ocicni")+"/")
		}
		before := slices.DeleteFunc(treeFiles(t, root), func(s string) bool { return !isKept(s) })

		fx := fakecni.New()
		fx.OnlyPlugins("fake")
		logger, _ := test.NewNullLogger()
		m, err := New(WithConfDir(confDir), WithBinDirs(binDir), WithCacheDir(cacheDir), WithoutWatcher(),
			WithExec(fx), WithLogger(logrus.NewEntry(logger)))
		require.NoError(t, err)
		defer func() { _ = m.Shutdown() }()

		_ = m.TearDownPodWithContext(context.Background(), PodNetwork{ID: fuzzID})
		_ = m.GC(context.Background(), nil)
		_ = m.GC(context.Background(), []*PodNetwork{{ID: fuzzID}})

		after := slices.DeleteFunc(treeFiles(t, root), func(s string) bool { return !isKept(s) })
		assert.Equal(t, before, after, "files outside the results and order dirs")
		for _, c := range fx.Calls() {
			assertSafeCall(t, c)
		}
	})
}

// assertSafeCall checks that a plugin call carries only names and paths
// that a request would have been allowed to carry.
func assertSafeCall(t *testing.T, c fakecni.Call) {
	t.Helper()
	if c.Verb == "GC" || c.Verb == "STATUS" {
		return // no container
	}
	require.NoError(t, cache.ValidateNames(c.Network, c.ContainerID, c.IfName), "%v", c.Env)
	if ns := c.NetNS; ns != "" {
		_, err := usableStoredNetNS(ns)
		require.NoError(t, err, "CNI_NETNS %q", ns)
	}
}

// FuzzHealRetryFromCache gives container ctr1 a pending DEL retry, due
// now, for net/eth0, then writes arbitrary content into the attachment's
// cache entry, and runs the retry as the healer does (in this process,
// and as a new manager resumes it at start: the same function). No
// content may crash the process or reach a plugin as names or paths a
// request could not carry; the retry always runs the attachment's DEL,
// and once it succeeded nothing of the attachment is left.
func FuzzHealRetryFromCache(f *testing.F) {
	conf := base64.StdEncoding.EncodeToString([]byte(`{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"fake"}]}`))
	f.Add([]byte(fmt.Sprintf(`{"kind":"cniCacheV1","containerId":"someone-else","config":%q,"ifName":"eth0","networkName":"net","result":{"cniVersion":"0.4.0","ips":[null]}}`, conf)))
	f.Add([]byte(fmt.Sprintf(`{"kind":"cniCacheV1","containerId":"ctr1","config":%q,"ifName":"eth0","networkName":"net","result":{"cniVersion":"0.4.0","ips":[null]}}`, conf)))
	f.Add([]byte(fmt.Sprintf(`{"kind":"cniCacheV1","containerId":"ctr1","config":%q,"ifName":"eth0","networkName":"net","result":{"cniVersion":"0.3.1","interfaces":[null]}}`, conf)))
	f.Add([]byte(fmt.Sprintf(`{"kind":"cniCacheV1","containerId":"ctr1","config":%q,"ifName":"eth0","networkName":"net","netns":"/proc/1/ns/net","result":{"cniVersion":"1.0.0"}}`, conf)))
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"ctr1","ifName":"eth0","networkName":"net","result":[]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(nil))

	f.Fuzz(func(t *testing.T, entryData []byte) {
		root := t.TempDir()
		cacheDir := filepath.Join(root, "cache")
		confDir := filepath.Join(root, "net.d")
		resultsDir := filepath.Join(cacheDir, "results")
		ordersDir := filepath.Join(cacheDir, "ocicni", "attachments")
		for _, d := range []string{confDir, resultsDir, ordersDir} {
			require.NoError(t, os.MkdirAll(d, 0o700))
		}
		writeConf(t, confDir, "10-net.conflist", `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"fake"}]}`)
		require.NoError(t, os.WriteFile(filepath.Join(root, "victim"), []byte("keep"), 0o600))
		record := `{"kind":"ocicniOrderV1","containerId":"ctr1","attachments":[{"network":"net","ifName":"eth0",` +
			`"heal":{"attempts":1,"since":"2026-01-01T00:00:00Z","next":"2026-01-01T00:00:01Z","lastError":"busy"}}]}`
		require.NoError(t, os.WriteFile(filepath.Join(ordersDir, fuzzID), []byte(record), 0o600))
		entry := filepath.Join(resultsDir, "net-ctr1-eth0")
		require.NoError(t, os.WriteFile(entry, entryData, 0o600))

		fx := fakecni.New()
		fx.OnlyPlugins("fake")
		logger, _ := test.NewNullLogger()
		m, err := New(WithConfDir(confDir), WithBinDirs(filepath.Join(root, "bin")), WithCacheDir(cacheDir), WithoutWatcher(),
			WithExec(fx), WithLogger(logrus.NewEntry(logger)), WithoutHealing())
		require.NoError(t, err)
		defer func() { _ = m.Shutdown() }()

		_, rejected := cache.New(cacheDir).Get("net", fuzzID, "eth0")
		m.teardown.retryDELs(context.Background(), fuzzID, trace.SpanContext{})

		dels := fx.Calls("DEL")
		require.Len(t, dels, 1, "the due retry ran its DEL")
		assertSafeCall(t, dels[0])
		if rejected != nil {
			assert.NotContains(t, dels[0].Config, "prevResult", "libcni read an entry the inventory rejected: %v", rejected)
		}
		assert.NoFileExists(t, entry, "the entry goes once DEL succeeded")
		assert.NoFileExists(t, filepath.Join(ordersDir, fuzzID), "the record goes once DEL succeeded")
		assert.FileExists(t, filepath.Join(root, "victim"))
	})
}
