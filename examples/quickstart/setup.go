package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// bundledConflist is the network the quickstart attaches: a bridge with
// host-local IPAM. writeConflist adds a private IPAM dataDir to it.
//
//go:embed 10-quickstart.conflist
var bundledConflist []byte

// bundle describes the network configuration written to the conf dir.
type bundle struct {
	Path   string   // the file in the conf dir
	Name   string   // network name
	Bridge string   // bridge device on the host
	Subnet string   // first IPAM range
	Types  []string // plugin binaries it needs
}

// writeConflist writes the bundled configuration into confDir, pointing
// host-local at dataDir so that its reservations stay out of
// /var/lib/cni/networks.
func writeConflist(confDir, dataDir string) (*bundle, error) {
	// A typed view for the fields the quickstart reads...
	var view struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				Type   string `json:"type"`
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	// ...and a generic one to edit without dropping unknown keys.
	var conf map[string]any
	if err := errors.Join(json.Unmarshal(bundledConflist, &view), json.Unmarshal(bundledConflist, &conf)); err != nil {
		return nil, fmt.Errorf("bundled conflist: %w", err)
	}
	plugins, _ := conf["plugins"].([]any)
	if len(view.Plugins) == 0 || len(plugins) == 0 || len(view.Plugins[0].IPAM.Ranges) == 0 || len(view.Plugins[0].IPAM.Ranges[0]) == 0 {
		return nil, errors.New("bundled conflist: want a bridge plugin with one IPAM range first")
	}
	first := view.Plugins[0]
	b := &bundle{
		Path:   filepath.Join(confDir, "10-quickstart.conflist"),
		Name:   view.Name,
		Bridge: first.Bridge,
		Subnet: first.IPAM.Ranges[0][0].Subnet,
		Types:  []string{first.Type, first.IPAM.Type},
	}
	for _, p := range view.Plugins[1:] {
		b.Types = append(b.Types, p.Type)
	}
	ipam, _ := plugins[0].(map[string]any)["ipam"].(map[string]any)
	ipam["dataDir"] = dataDir

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
func findPlugins(ctx context.Context, flagDir, buildDir string, types []string) (string, error) {
	dir := flagDir
	if dir == "" {
		if err := buildPlugins(ctx, buildDir); err != nil {
			return "", err
		}
		dir = buildDir
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		dir = abs
		fmt.Printf("    using %s (-bin-dir)\n", dir)
	}
	for _, t := range types {
		if st, err := os.Stat(filepath.Join(dir, t)); err != nil || st.IsDir() {
			return "", fmt.Errorf("plugin %q not found in %s", t, dir)
		}
	}
	fmt.Printf("    found %s in %s\n", strings.Join(types, ", "), dir)
	return dir, nil
}

// buildPlugins builds the reference CNI plugins pinned by the repository's
// tools module into dir, as "cd tools && go build -o DIR/ tool".
func buildPlugins(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("cannot run \"go env GOMOD\" to find the repository (pass -bin-dir to skip building): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("not inside the ocicni repository: run from its root, or pass -bin-dir")
	}
	tools := filepath.Join(filepath.Dir(gomod), "tools")
	if _, err := os.Stat(filepath.Join(tools, "go.mod")); err != nil {
		return fmt.Errorf("no tools module next to %s: run from the ocicni repository, or pass -bin-dir", gomod)
	}

	fmt.Printf("    building the reference plugins pinned by %s\n", filepath.Join(tools, "go.mod"))
	fmt.Printf("    $ cd %s && go build -o %s/ tool\n", tools, dir)
	fmt.Println("    (the first build downloads and compiles them; later ones come from the Go build cache)")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "tool")
	cmd.Dir = tools
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the plugins: %w", err)
	}
	fmt.Printf("    built in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}
