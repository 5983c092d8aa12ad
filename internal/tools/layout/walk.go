package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"
)

// stop is one function the teardown walk reaches, and its file.
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
