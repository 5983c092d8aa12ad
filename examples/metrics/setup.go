package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bundledConflist is the network the example attaches: a bridge with
// host-local IPAM, at CNI 1.1.0 so that GC also sends the plugins the GC
// verb. writeConflist adds a private IPAM dataDir to it.
//
//go:embed 10-metrics.conflist
var bundledConflist []byte

// bundle describes the network configuration written to the conf dir.
type bundle struct {
	Path   string   // the file in the conf dir
	Name   string   // network name
	Bridge string   // bridge device on the host
	Types  []string // plugin binaries it needs
}

// writeConflist writes the bundled configuration into confDir, pointing
// host-local at dataDir so that its reservations stay out of
// /var/lib/cni/networks.
func writeConflist(confDir, dataDir string) (*bundle, error) {
	// A typed view for the fields the example reads...
	var view struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				Type string `json:"type"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	// ...and a generic one to edit without dropping unknown keys.
	var conf map[string]any
	if err := errors.Join(json.Unmarshal(bundledConflist, &view), json.Unmarshal(bundledConflist, &conf)); err != nil {
		return nil, fmt.Errorf("bundled conflist: %w", err)
	}
	plugins, _ := conf["plugins"].([]any)
	if len(view.Plugins) == 0 || len(plugins) == 0 || view.Plugins[0].Bridge == "" {
		return nil, errors.New("bundled conflist: want a bridge plugin with IPAM first")
	}
	ipam, ok := plugins[0].(map[string]any)["ipam"].(map[string]any)
	if !ok {
		return nil, errors.New("bundled conflist: the first plugin has no ipam object")
	}
	ipam["dataDir"] = dataDir

	first := view.Plugins[0]
	b := &bundle{
		Path:   filepath.Join(confDir, "10-metrics.conflist"),
		Name:   view.Name,
		Bridge: first.Bridge,
		Types:  []string{first.Type, first.IPAM.Type},
	}
	for _, p := range view.Plugins[1:] {
		b.Types = append(b.Types, p.Type)
	}

	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(b.Path, data, 0o644); err != nil {
		return nil, err
	}
	return b, nil
}

// findPlugins returns a directory holding every plugin in types: flagDir
// when it is given, else buildDir after building the reference plugins
// into it.
func findPlugins(ctx context.Context, w io.Writer, flagDir, buildDir string, types []string) (string, error) {
	dir := flagDir
	if dir == "" {
		if err := buildPlugins(ctx, w, buildDir); err != nil {
			return "", err
		}
		dir = buildDir
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		dir = abs
	}
	for _, t := range types {
		if st, err := os.Stat(filepath.Join(dir, t)); err != nil || st.IsDir() {
			return "", fmt.Errorf("plugin %q not found in %s", t, dir)
		}
	}
	fmt.Fprintf(w, "    found %s in %s\n", strings.Join(types, ", "), dir)
	return dir, nil
}

// libraryModule is the module whose tools module pins the plugins.
const libraryModule = "github.com/seed-671fdd43/ocicni"

// buildPlugins builds the reference CNI plugins pinned by the ocicni
// repository's tools module into dir, as "cd tools && go build -o DIR/
// tool". It finds the repository through this module's replace directive
// ("go list -m"), so it works only inside the repository: a copy of the
// example outside it gets the library from the module cache, which holds
// no tools module, and must pass -bin-dir.
func buildPlugins(ctx context.Context, w io.Writer, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", libraryModule).Output()
	if err != nil {
		return fmt.Errorf("cannot run \"go list -m %s\" to find the repository (run from examples/metrics, or pass -bin-dir): %w",
			libraryModule, err)
	}
	tools := filepath.Join(strings.TrimSpace(string(out)), "tools")
	if _, err := os.Stat(filepath.Join(tools, "go.mod")); err != nil {
		return fmt.Errorf("no tools module at %s: run inside the ocicni repository, or pass -bin-dir", tools)
	}

	fmt.Fprintf(w, "    $ cd %s && go build -o %s/ tool\n", tools, dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "tool")
	cmd.Dir = tools
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the plugins: %w", err)
	}
	return nil
}
