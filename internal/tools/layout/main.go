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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	pkgPath := flag.String("pkg", "./pkg/ocicni", "the package to measure")
	typeName := flag.String("type", "Manager", "the type whose methods are counted")
	from := flag.String("from", "TearDownPodWithContext", "the method of -type the teardown walk starts at")
	verbose := flag.Bool("v", false, "print the walk's stops and the calls between files")
	flag.BoolVar(&structured, "structured", true, "follow only values of the pod that are not strings, numbers or booleans (the pod, its plans, its inventory), not its ID or names alone")
	flag.StringVar(&within, "within", "pkg/", "count only the stops whose files are under this prefix of the module")
	flag.Parse()

	l, err := newLoader()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layout:", err)
		os.Exit(1)
	}
	path := l.module + "/" + strings.TrimPrefix(filepath.ToSlash(filepath.Clean(*pkgPath)), "./")
	p, err := l.load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layout:", err)
		os.Exit(1)
	}
	l.loadAll()

	files(l, p)
	methods(l, p, *typeName)
	pairs(l, p, *verbose)
	walk(l, p, *typeName, *from, *verbose)
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

func newLoader() (*loader, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	mod, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	fset := token.NewFileSet()
	return &loader{module: mod, root: dir, fset: fset, pkgs: map[string]*pkg{},
		other: importer.ForCompiler(fset, "source", nil)}, nil
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
	fmt.Printf("files: %d non-test files, %d lines in %s\n", len(p.files), lines, p.path)
}

func methods(l *loader, p *pkg, typeName string) {
	obj := p.types.Scope().Lookup(typeName)
	if obj == nil {
		fmt.Printf("methods: no type %s\n", typeName)
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
	fmt.Printf("methods: %s has %d methods in %d files (%s)\n", typeName, named.NumMethods(), len(byFile), strings.Join(parts, ", "))
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
	fmt.Printf("pairs: %d pairs of files call each other both ways", len(both))
	if len(both) > 0 {
		fmt.Printf(": %s", strings.Join(both, ", "))
	}
	fmt.Println()
	if verbose {
		var all []string
		for e, n := range edges {
			all = append(all, fmt.Sprintf("  %s -> %s (%d)", e[0], e[1], n))
		}
		sort.Strings(all)
		fmt.Println(strings.Join(all, "\n"))
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

func walk(l *loader, p *pkg, typeName, from string, verbose bool) {
	obj := p.types.Scope().Lookup(typeName)
	if obj == nil {
		return
	}
	m, _, _ := types.LookupFieldOrMethod(types.NewPointer(obj.Type()), true, p.types, from)
	start, ok := m.(*types.Func)
	if !ok {
		fmt.Printf("walk: no method %s.%s\n", typeName, from)
		return
	}
	fd, sp := l.decl(start)
	seen := map[*types.Func]bool{start: true}
	stops := []stop{{start.FullName(), l.fileOf(start.Pos())}}
	tainted := map[types.Object]bool{}
	for _, field := range fd.Type.Params.List {
		for _, name := range field.Names {
			tainted[sp.info.Defs[name]] = true
		}
	}
	var visit func(fd *ast.FuncDecl, p *pkg, tainted map[types.Object]bool)
	visit = func(fd *ast.FuncDecl, p *pkg, tainted map[types.Object]bool) {
		if fd.Body == nil {
			return
		}
		spread(p.info, fd.Body, tainted)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := callee(p.info, call)
			if fn == nil || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), l.module) {
				return true
			}
			recvTainted := false
			if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok && p.info.Selections[sel] != nil {
				recvTainted = mentions(p.info, sel.X, tainted)
			}
			var argTainted []bool
			anyArg := false
			for _, a := range call.Args {
				t := mentions(p.info, a, tainted)
				argTainted = append(argTainted, t)
				anyArg = anyArg || t
			}
			if !recvTainted && !anyArg {
				return true
			}
			targets := []*types.Func{fn}
			if impls := l.implementations(fn); impls != nil {
				targets = impls
			}
			for _, t := range targets {
				t = t.Origin()
				if seen[t] {
					continue
				}
				cd, cp := l.decl(t)
				if cd == nil {
					continue
				}
				seen[t] = true
				stops = append(stops, stop{t.FullName(), l.fileOf(t.Pos())})
				inner := map[types.Object]bool{}
				if recvTainted && cd.Recv != nil {
					for _, name := range cd.Recv.List[0].Names {
						inner[cp.info.Defs[name]] = true
					}
				}
				i := 0
				for _, field := range cd.Type.Params.List {
					names := field.Names
					if len(names) == 0 {
						i++
						continue
					}
					for _, name := range names {
						if i < len(argTainted) && argTainted[i] || i >= len(argTainted) && anyArg {
							inner[cp.info.Defs[name]] = true
						}
						i++
					}
				}
				visit(cd, cp, inner)
			}
			return true
		})
	}
	visit(fd, sp, tainted)

	fileSet := map[string]bool{}
	returns := 0
	prev := ""
	kept := stops[:0]
	for _, s := range stops {
		if strings.HasPrefix(s.file, within) {
			kept = append(kept, s)
		}
	}
	stops = kept
	for _, s := range stops {
		if s.file != prev && fileSet[s.file] {
			returns++
		}
		fileSet[s.file] = true
		prev = s.file
	}
	fmt.Printf("walk: from %s.%s, %d stops in %d files, %d returns to a file it had left\n", typeName, from, len(stops), len(fileSet), returns)
	if verbose {
		for _, s := range stops {
			fmt.Printf("  %-40s %s\n", s.file, s.name)
		}
	}
}

// spread marks every variable assigned from an expression that mentions
// a marked one, until nothing changes.
func spread(info *types.Info, body *ast.BlockStmt, tainted map[types.Object]bool) {
	for changed := true; changed; {
		changed = false
		mark := func(lhs ast.Expr) {
			for {
				switch e := lhs.(type) {
				case *ast.SelectorExpr:
					lhs = e.X
					continue
				case *ast.IndexExpr:
					lhs = e.X
					continue
				case *ast.StarExpr:
					lhs = e.X
					continue
				}
				break
			}
			if id, ok := lhs.(*ast.Ident); ok {
				obj := info.Defs[id]
				if obj == nil {
					obj = info.Uses[id]
				}
				if obj != nil && !tainted[obj] {
					tainted[obj] = true
					changed = true
				}
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.AssignStmt:
				for _, r := range s.Rhs {
					if mentions(info, r, tainted) {
						for _, lhs := range s.Lhs {
							mark(lhs)
						}
						break
					}
				}
			case *ast.ValueSpec:
				for _, r := range s.Values {
					if mentions(info, r, tainted) {
						for _, lhs := range s.Names {
							mark(lhs)
						}
						break
					}
				}
			case *ast.RangeStmt:
				if mentions(info, s.X, tainted) {
					if s.Key != nil {
						mark(s.Key)
					}
					if s.Value != nil {
						mark(s.Value)
					}
				}
			}
			return true
		})
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
