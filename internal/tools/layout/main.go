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
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// pkg is one package of the module, parsed and type-checked.
type pkg struct {
	path  string
	files []*ast.File
	types *types.Package
	info  *types.Info
}

// loader parses and type-checks the module's packages from source, and
// imports the others through the source importer.
type loader struct {
	module string
	root   string
	fset   *token.FileSet
	pkgs   map[string]*pkg
	other  types.Importer
}

func newLoader(in string) (*loader, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}")
	cmd.Dir = in
	listed, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	mod, dir, _ := strings.Cut(strings.TrimSpace(string(listed)), " ")
	fset := token.NewFileSet()
	return &loader{
		module: mod, root: dir, fset: fset, pkgs: map[string]*pkg{},
		other: importer.ForCompiler(fset, "source", nil),
	}, nil
}

func (l *loader) Import(path string) (*types.Package, error) {
	if path == l.module || strings.HasPrefix(path, l.module+"/") {
		p, err := l.load(path)
		if err != nil {
			return nil, err
		}
		return p.types, nil
	}
	return l.other.Import(path)
}

func (l *loader) load(path string) (*pkg, error) {
	if p, ok := l.pkgs[path]; ok {
		return p, nil
	}
	dir := filepath.Join(l.root, strings.TrimPrefix(strings.TrimPrefix(path, l.module), "/"))
	parsed, err := parser.ParseDir(l.fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	p := &pkg{path: path, info: &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
		Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{},
	}}
	for name, ap := range parsed {
		if strings.HasSuffix(name, "_test") || name == "main" && !strings.Contains(path, "/cmd/") {
			continue
		}
		for fname, f := range ap.Files {
			if !buildable(fname) {
				continue
			}
			p.files = append(p.files, f)
		}
	}
	sort.Slice(p.files, func(i, j int) bool {
		return l.fset.File(p.files[i].Pos()).Name() < l.fset.File(p.files[j].Pos()).Name()
	})
	conf := types.Config{Importer: l, Error: func(error) {}}
	p.types, _ = conf.Check(path, l.fset, p.files, p.info)
	l.pkgs[path] = p
	return p, nil
}

// buildable says whether a file builds on linux/amd64, by its name's
// suffix and a leading //go:build line.
func buildable(name string) bool {
	base := strings.TrimSuffix(filepath.Base(name), ".go")
	for _, os := range []string{"darwin", "freebsd", "windows", "openbsd", "netbsd", "solaris"} {
		if strings.HasSuffix(base, "_"+os) {
			return false
		}
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "//go:build ") {
			return strings.Contains(line, "linux") || strings.HasPrefix(line, "//go:build !")
		}
		if strings.HasPrefix(line, "package ") {
			break
		}
	}
	return true
}

// loadAll loads every package of the module under pkg and internal, so
// that the walk finds every implementation of an interface.
func (l *loader) loadAll() {
	for _, top := range []string{"pkg", "internal"} {
		_ = filepath.WalkDir(filepath.Join(l.root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" || d.Name() == "tools" || d.Name() == "testplugins" || d.Name() == "testenv" {
				return filepath.SkipDir
			}
			rel, _ := filepath.Rel(l.root, p)
			if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
				_, _ = l.load(l.module + "/" + filepath.ToSlash(rel))
			}
			return nil
		})
	}
}

func (l *loader) fileOf(pos token.Pos) string {
	name, err := filepath.Rel(l.root, l.fset.File(pos).Name())
	if err != nil {
		return l.fset.File(pos).Name()
	}
	return name
}

func files(l *loader, p *pkg) {
	lines := 0
	for _, f := range p.files {
		lines += l.fset.File(f.Pos()).LineCount()
	}
	fmt.Fprintf(out, "files: %d non-test files, %d lines in %s\n", len(p.files), lines, p.path)
}

func methods(l *loader, p *pkg, typeName string) {
	obj := p.types.Scope().Lookup(typeName)
	if obj == nil {
		fmt.Fprintf(out, "methods: no type %s\n", typeName)
		return
	}
	named := obj.Type().(*types.Named)
	byFile := map[string]int{}
	for i := range named.NumMethods() {
		byFile[filepath.Base(l.fileOf(named.Method(i).Pos()))]++
	}
	var parts []string
	for f, n := range byFile {
		parts = append(parts, fmt.Sprintf("%s %d", f, n))
	}
	sort.Strings(parts)
	fmt.Fprintf(out, "methods: %s has %d methods in %d files (%s)\n", typeName, named.NumMethods(), len(byFile), strings.Join(parts, ", "))
}

// callee resolves a call's function, or nil.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		f, _ := info.Uses[fun].(*types.Func)
		return f
	case *ast.SelectorExpr:
		f, _ := info.Uses[fun.Sel].(*types.Func)
		return f
	case *ast.IndexExpr: // a generic function instantiated
		if id, ok := fun.X.(*ast.Ident); ok {
			f, _ := info.Uses[id].(*types.Func)
			return f
		}
	}
	return nil
}

func pairs(l *loader, p *pkg, verbose bool) {
	edges := map[[2]string]int{}
	for _, f := range p.files {
		from := filepath.Base(l.fileOf(f.Pos()))
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := callee(p.info, call)
			if fn == nil || fn.Pkg() != p.types {
				return true
			}
			if to := filepath.Base(l.fileOf(fn.Pos())); to != from {
				edges[[2]string{from, to}]++
			}
			return true
		})
	}
	var both []string
	for e := range edges {
		if e[0] < e[1] && edges[[2]string{e[1], e[0]}] > 0 {
			both = append(both, e[0]+"↔"+e[1])
		}
	}
	sort.Strings(both)
	fmt.Fprintf(out, "pairs: %d pairs of files call each other both ways", len(both))
	if len(both) > 0 {
		fmt.Fprintf(out, ": %s", strings.Join(both, ", "))
	}
	fmt.Fprintln(out)
	if verbose {
		var all []string
		for e, n := range edges {
			all = append(all, fmt.Sprintf("  %s -> %s (%d)", e[0], e[1], n))
		}
		sort.Strings(all)
		fmt.Fprintln(out, strings.Join(all, "\n"))
	}
}

// decl finds a function's declaration among the loaded packages.
func (l *loader) decl(fn *types.Func) (*ast.FuncDecl, *pkg) {
	if fn.Pkg() == nil {
		return nil, nil
	}
	p, ok := l.pkgs[fn.Pkg().Path()]
	if !ok {
		return nil, nil
	}
	fn = fn.Origin()
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && p.info.Defs[fd.Name] == fn {
				return fd, p
			}
		}
	}
	return nil, nil
}

// implementations finds the module's methods that an interface method
// call may reach.
func (l *loader) implementations(fn *types.Func) []*types.Func {
	sig := fn.Type().(*types.Signature)
	if sig.Recv() == nil {
		return nil
	}
	iface, ok := sig.Recv().Type().Underlying().(*types.Interface)
	if !ok {
		return nil
	}
	var out []*types.Func
	for _, p := range l.pkgs {
		if p.types == nil {
			continue
		}
		for _, name := range p.types.Scope().Names() {
			tn, ok := p.types.Scope().Lookup(name).(*types.TypeName)
			if !ok || types.IsInterface(tn.Type()) {
				continue
			}
			for _, t := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
				if !types.Implements(t, iface) {
					continue
				}
				obj, _, _ := types.LookupFieldOrMethod(t, true, fn.Pkg(), fn.Name())
				if m, ok := obj.(*types.Func); ok {
					out = append(out, m)
				}
				break
			}
		}
	}
	return out
}

type stop struct {
	name string
	file string
}

// walker follows a call tree from one function through the calls that
// pass a marked value on.
type walker struct {
	l     *loader
	seen  map[*types.Func]bool
	stops []stop
}

func walk(l *loader, p *pkg, typeName, from string, verbose bool) {
	obj := p.types.Scope().Lookup(typeName)
	if obj == nil {
		return
	}
	m, _, _ := types.LookupFieldOrMethod(types.NewPointer(obj.Type()), true, p.types, from)
	start, ok := m.(*types.Func)
	if !ok {
		fmt.Fprintf(out, "walk: no method %s.%s\n", typeName, from)
		return
	}
	fd, sp := l.decl(start)
	w := &walker{l: l, seen: map[*types.Func]bool{start: true}}
	w.stops = append(w.stops, stop{start.FullName(), l.fileOf(start.Pos())})
	tainted := map[types.Object]bool{}
	for _, field := range fd.Type.Params.List {
		for _, name := range field.Names {
			tainted[sp.info.Defs[name]] = true
		}
	}
	w.visit(fd, sp, tainted)
	stops, files, returns := count(w.stops)
	fmt.Fprintf(out, "walk: from %s.%s, %d stops in %d files, %d returns to a file it had left\n", typeName, from, len(stops), files, returns)
	if verbose {
		for _, s := range stops {
			fmt.Fprintf(out, "  %-40s %s\n", s.file, s.name)
		}
	}
}

// count keeps the stops under -within and counts their files and the
// returns to a file the walk had left.
func count(all []stop) (stops []stop, files, returns int) {
	seen := map[string]bool{}
	prev := ""
	for _, s := range all {
		if !strings.HasPrefix(s.file, within) {
			continue
		}
		stops = append(stops, s)
		if s.file != prev && seen[s.file] {
			returns++
		}
		seen[s.file] = true
		prev = s.file
	}
	return stops, len(seen), returns
}

// visit walks fd's body with the variables in tainted marked.
func (w *walker) visit(fd *ast.FuncDecl, p *pkg, tainted map[types.Object]bool) {
	if fd.Body == nil {
		return
	}
	spread(p.info, fd.Body, tainted)
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			w.follow(call, p, tainted)
		}
		return true
	})
}

// follow goes into the module's functions that call may reach, when it
// passes a marked value on as an argument or the receiver.
func (w *walker) follow(call *ast.CallExpr, p *pkg, tainted map[types.Object]bool) {
	fn := callee(p.info, call)
	if fn == nil || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), w.l.module) {
		return
	}
	recvTainted := false
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && p.info.Selections[sel] != nil {
		recvTainted = mentions(p.info, sel.X, tainted)
	}
	argTainted := make([]bool, len(call.Args))
	anyArg := false
	for i, a := range call.Args {
		argTainted[i] = mentions(p.info, a, tainted)
		anyArg = anyArg || argTainted[i]
	}
	if !recvTainted && !anyArg {
		return
	}
	targets := []*types.Func{fn}
	if impls := w.l.implementations(fn); impls != nil {
		targets = impls
	}
	for _, t := range targets {
		t = t.Origin()
		if w.seen[t] {
			continue
		}
		cd, cp := w.l.decl(t)
		if cd == nil {
			continue
		}
		w.seen[t] = true
		w.stops = append(w.stops, stop{t.FullName(), w.l.fileOf(t.Pos())})
		w.visit(cd, cp, calleeMarks(cd, cp, recvTainted, argTainted, anyArg))
	}
}

// calleeMarks returns the callee's receiver and parameters that receive a
// marked value; a variadic tail is marked when any argument is.
func calleeMarks(cd *ast.FuncDecl, cp *pkg, recvTainted bool, argTainted []bool, anyArg bool) map[types.Object]bool {
	inner := map[types.Object]bool{}
	if recvTainted && cd.Recv != nil {
		for _, name := range cd.Recv.List[0].Names {
			inner[cp.info.Defs[name]] = true
		}
	}
	i := 0
	for _, field := range cd.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, name := range field.Names {
			if i < len(argTainted) && argTainted[i] || i >= len(argTainted) && anyArg {
				inner[cp.info.Defs[name]] = true
			}
			i++
		}
	}
	return inner
}

// spread marks every variable assigned from an expression that mentions
// a marked one, until nothing changes.
func spread(info *types.Info, body *ast.BlockStmt, tainted map[types.Object]bool) {
	for changed := true; changed; {
		changed = false
		ast.Inspect(body, func(n ast.Node) bool {
			for _, lhs := range assignedFromMarked(info, n, tainted) {
				if obj := root(info, lhs); obj != nil && !tainted[obj] {
					tainted[obj] = true
					changed = true
				}
			}
			return true
		})
	}
}

// assignedFromMarked returns what node n assigns from an expression that
// mentions a marked variable.
func assignedFromMarked(info *types.Info, n ast.Node, tainted map[types.Object]bool) []ast.Expr {
	switch s := n.(type) {
	case *ast.AssignStmt:
		for _, r := range s.Rhs {
			if mentions(info, r, tainted) {
				return s.Lhs
			}
		}
	case *ast.ValueSpec:
		for _, r := range s.Values {
			if mentions(info, r, tainted) {
				out := make([]ast.Expr, len(s.Names))
				for i, name := range s.Names {
					out[i] = name
				}
				return out
			}
		}
	case *ast.RangeStmt:
		if mentions(info, s.X, tainted) {
			var out []ast.Expr
			if s.Key != nil {
				out = append(out, s.Key)
			}
			if s.Value != nil {
				out = append(out, s.Value)
			}
			return out
		}
	}
	return nil
}

// root returns the variable an assignment's left side writes to: x for
// x, x.f, x[i] and *x.
func root(info *types.Info, lhs ast.Expr) types.Object {
	for {
		switch e := lhs.(type) {
		case *ast.SelectorExpr:
			lhs = e.X
		case *ast.IndexExpr:
			lhs = e.X
		case *ast.StarExpr:
			lhs = e.X
		case *ast.Ident:
			if obj := info.Defs[e]; obj != nil {
				return obj
			}
			return info.Uses[e]
		default:
			return nil
		}
	}
}

var (
	structured bool
	within     string
)

// mentions says whether an expression names a marked variable.
func mentions(info *types.Info, e ast.Expr, tainted map[types.Object]bool) bool {
	if structured {
		if tv, ok := info.Types[e]; ok {
			if _, basic := tv.Type.Underlying().(*types.Basic); basic {
				return false
			}
		}
	}
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && tainted[info.Uses[id]] {
			found = true
		}
		return !found
	})
	return found
}
