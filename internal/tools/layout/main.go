// Command layout prints the measures by which the engine's order is
// judged, for package ocicni (or the package named by -pkg):
//
//   - its non-test files and their lines;
//   - the methods of its type Manager (or -type), by file;
//   - the pairs of its files that call each other both ways;
//   - a teardown followed from (*Manager).TearDownPodWithContext (or
//     -from) through every call that passes the pod on: its stops (the
//     functions reached, each once), the files they are in, and how often
//     the walk returns to a file it had left.
//
// The walk follows a call when an argument or the receiver is derived
// from the pod: the start's parameters are, and so is every variable
// assigned from an expression that names one of them. A call through an
// interface is followed into every implementation in the module. Calls
// into other modules are not followed.
//
// It uses the standard library only, so it adds nothing to go.mod. Run it
// from the module root: go run ./internal/tools/layout.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	var c config
	flag.StringVar(&c.pkg, "pkg", "./pkg/ocicni", "the package to measure")
	flag.StringVar(&c.typeName, "type", "Manager", "the type whose methods are counted")
	flag.StringVar(&c.from, "from", "TearDownPodWithContext", "the method of -type the teardown walk starts at")
	flag.BoolVar(&c.verbose, "v", false, "print the walk's stops and the calls between files")
	flag.BoolVar(&structured, "structured", true, "follow only values of the pod that are not strings, numbers or booleans (the pod, its plans, its inventory), not its ID or names alone")
	flag.StringVar(&within, "within", "pkg/", "count only the stops whose files are under this prefix of the module")
	flag.Parse()
	if err := run(".", c); err != nil {
		fmt.Fprintln(os.Stderr, "layout:", err)
		os.Exit(1)
	}
}

// config is what the flags choose.
type config struct {
	pkg, typeName, from string
	verbose             bool
}

// out is where the measures are printed.
var out io.Writer = os.Stdout

// run prints the measures of the module in dir.
func run(dir string, c config) error {
	l, err := newLoader(dir)
	if err != nil {
		return err
	}
	path := l.module + "/" + strings.TrimPrefix(filepath.ToSlash(filepath.Clean(c.pkg)), "./")
	p, err := l.load(path)
	if err != nil {
		return err
	}
	l.loadAll()

	files(l, p)
	methods(l, p, c.typeName)
	pairs(l, p, c.verbose)
	walk(l, p, c.typeName, c.from, c.verbose)
	return nil
}
