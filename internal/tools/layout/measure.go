package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
)

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
