package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-671fdd43/ocicni/internal/conflist"
)

// WriteFile writes content to dir/name and returns the path.
func WriteFile(tb testing.TB, dir, name, content string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return path
}

// Conflist returns a network configuration list holding the given plugin
// configurations, which are raw JSON objects. It panics if one of them is
// not valid JSON: these are test fixtures.
func Conflist(name, cniVersion string, plugins ...string) string {
	for _, p := range plugins {
		if !json.Valid([]byte(p)) {
			panic(fmt.Sprintf("testenv: plugin config of %s is not valid JSON: %s", name, p))
		}
	}
	return string(conflist.Build(name, cniVersion, plugins...))
}

// BridgeConflist returns a configuration list for network n: the bridge
// plugin (gateway on, masquerade off) with host-local IPAM over n's range,
// keeping its reservations under dataDir, followed by extraPlugins (raw
// JSON objects such as portmap or a [RecorderConf]). It panics if an extra
// plugin is not valid JSON.
func BridgeConflist(name, cniVersion string, n Net, dataDir string, extraPlugins ...string) string {
	bridge := mustJSON(map[string]any{
		"type":      "bridge",
		"bridge":    n.Bridge,
		"isGateway": true,
		"ipMasq":    false,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": dataDir,
			"ranges": [][]map[string]string{{{
				"subnet":     n.Subnet,
				"gateway":    n.Gateway,
				"rangeStart": n.RangeStart,
				"rangeEnd":   n.RangeEnd,
			}}},
		},
	})
	return Conflist(name, cniVersion, append([]string{bridge}, extraPlugins...)...)
}

// RecorderConf returns a configuration for the [Recorder] fake plugin that
// logs to logFile, with the keys of extra (such as "add" or "del"
// behaviours) added. It works as a standalone network configuration and as
// an element of [Conflist]. It panics if extra cannot be encoded.
func RecorderConf(name, cniVersion, logFile string, extra map[string]any) string {
	m := map[string]any{
		"cniVersion": cniVersion,
		"name":       name,
		"type":       Recorder,
		"logFile":    logFile,
	}
	for k, v := range extra {
		m[k] = v
	}
	return mustJSON(m)
}

// Reservations returns the addresses that host-local has reserved for
// network under dataDir, sorted. The bookkeeping files (lock,
// last_reserved_ip.*) are left out. A missing directory means no
// reservations.
func Reservations(tb testing.TB, dataDir, network string) []string {
	tb.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, network))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	var ips []string
	for _, e := range entries {
		if !e.IsDir() && net.ParseIP(e.Name()) != nil {
			ips = append(ips, e.Name())
		}
	}
	slices.Sort(ips)
	return ips
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("testenv: encode configuration: " + err.Error())
	}
	return string(b)
}
