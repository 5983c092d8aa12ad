// Command vulncheck reads govulncheck's JSON stream (-format json) on
// stdin and decides whether CI fails.
//
// Only findings that our code calls (govulncheck's symbol level: the trace
// starts at a vulnerable function) count. Among those:
//
//   - a finding in a module we require fails the check (exit 1): it is ours
//     to fix, by raising that requirement;
//   - a finding in the standard library is printed as a warning: it depends
//     on the Go toolchain that builds the program, not on this module.
//
// Findings in packages we import or modules we require that our code does
// not call are counted, not listed. Exit 2 means the input could not be read.
//
// It uses the standard library only, so it adds nothing to go.mod.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The subset of govulncheck's JSON protocol (v1.0.0, in
// golang.org/x/vuln/internal/govulncheck) that this program reads.
type message struct {
	Config  *config  `json:"config,omitempty"`
	OSV     *osv     `json:"osv,omitempty"`
	Finding *finding `json:"finding,omitempty"`
}

type config struct {
	ScannerVersion string `json:"scanner_version"`
	GoVersion      string `json:"go_version"`
	DB             string `json:"db"`
	ScanLevel      string `json:"scan_level"`
}

type osv struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

type finding struct {
	OSV          string   `json:"osv"`
	FixedVersion string   `json:"fixed_version"`
	Trace        []*frame `json:"trace"`
}

type frame struct {
	Module   string    `json:"module"`
	Version  string    `json:"version"`
	Package  string    `json:"package"`
	Function string    `json:"function"`
	Receiver string    `json:"receiver"`
	Position *position `json:"position,omitempty"`
}

type position struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
}

// stdlib is the module name govulncheck gives the standard library.
const stdlib = "stdlib"

// called is one vulnerability that our code reaches, in one module.
type called struct {
	osv, module, version, fixed string
	// example is the first trace seen: where our code enters, and the
	// vulnerable symbol it reaches.
	entry, symbol string
}

type report struct {
	cfg       config
	summaries map[string]string
	called    map[string]*called // by OSV ID and module
	// uncalled holds the other findings, OSV ID to module, for the
	// summary line.
	uncalled map[string]string
}

func read(r io.Reader) (*report, error) {
	rep := &report{summaries: map[string]string{}, called: map[string]*called{}, uncalled: map[string]string{}}
	dec := json.NewDecoder(r)
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading govulncheck JSON: %w", err)
		}
		switch {
		case m.Config != nil:
			rep.cfg = *m.Config
		case m.OSV != nil:
			rep.summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil:
			rep.add(m.Finding)
		}
	}
	if rep.cfg.ScannerVersion == "" {
		return nil, errors.New("no config message: is this govulncheck -format json output?")
	}
	return rep, nil
}

func (r *report) add(f *finding) {
	if len(f.Trace) == 0 {
		return
	}
	vuln := f.Trace[0]
	if vuln.Function == "" { // module or package level: not called
		r.uncalled[f.OSV] = vuln.Module
		return
	}
	key := f.OSV + " " + vuln.Module
	if _, ok := r.called[key]; ok {
		return
	}
	c := &called{osv: f.OSV, module: vuln.Module, version: vuln.Version, fixed: f.FixedVersion, symbol: symbol(vuln)}
	entry := f.Trace[len(f.Trace)-1]
	c.entry = symbol(entry)
	if entry.Position != nil {
		c.entry = fmt.Sprintf("%s:%d: %s", entry.Position.Filename, entry.Position.Line, c.entry)
	}
	r.called[key] = c
}

func (r *report) isCalled(id string) bool {
	for _, c := range r.called {
		if c.osv == id {
			return true
		}
	}
	return false
}

func symbol(f *frame) string {
	s := f.Package + "."
	if f.Receiver != "" {
		s += f.Receiver + "."
	}
	return s + f.Function
}

// print writes the findings and returns how many fail the check.
func (r *report) print(w io.Writer) int {
	var list []*called
	for _, c := range r.called {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].module != list[j].module {
			return list[i].module < list[j].module
		}
		return list[i].osv < list[j].osv
	})
	failing, std := 0, 0
	for _, c := range list {
		level := "FAIL"
		if c.module == stdlib {
			level = "warning (standard library of " + r.cfg.GoVersion + ")"
			std++
		} else {
			failing++
		}
		fixed := c.fixed
		if fixed == "" {
			fixed = "no fix yet"
		} else {
			fixed = "fixed in " + fixed
		}
		fmt.Fprintf(w, "vulncheck: %s: %s %s@%s (%s): %s\n", level, c.osv, c.module, c.version, fixed, r.summaries[c.osv])
		fmt.Fprintf(w, "    for example %s reaches %s\n", c.entry, c.symbol)
	}
	notCalled, inModules := 0, []string(nil)
	for id, module := range r.uncalled {
		if r.isCalled(id) {
			continue
		}
		notCalled++
		if module != stdlib {
			inModules = append(inModules, id+" ("+module+")")
		}
	}
	sort.Strings(inModules)
	fmt.Fprintf(w, "vulncheck: govulncheck %s, %s, db %s: %d called in required modules, %d called in the standard library (a newer Go fixes them), %d more not called",
		r.cfg.ScannerVersion, r.cfg.GoVersion, r.cfg.DB, failing, std, notCalled)
	if len(inModules) > 0 {
		fmt.Fprintf(w, ", of which in required modules: %s", strings.Join(inModules, ", "))
	}
	fmt.Fprintln(w)
	return failing
}

func main() {
	rep, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(2)
	}
	if rep.print(os.Stdout) > 0 {
		os.Exit(1)
	}
}
