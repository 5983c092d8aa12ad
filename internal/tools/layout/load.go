package main

import (
	"fmt"
	"go/ast"
	"go/build"
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

// buildable says whether a file builds on linux/amd64, by go/build's
// rules: its name's GOOS and GOARCH suffixes and its //go:build line.
func buildable(name string) bool {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH = "linux", "amd64"
	ok, err := ctx.MatchFile(filepath.Dir(name), filepath.Base(name))
	return err == nil && ok
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
