package gocni

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gocni "github.com/containerd/go-cni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	face "github.com/seed-671fdd43/ocicni/pkg/gocni"
)

// The face's default directories are go-cni's on every OS a runtime is
// built for: compared here for this OS through the packages, and for
// each GOOS through the files that a build for it compiles, read from
// both packages' sources.
func TestDefaultsMatchGoCNI(t *testing.T) {
	assert.Equal(t, gocni.DefaultNetDir, face.DefaultNetDir)
	assert.Equal(t, gocni.DefaultCNIDir, face.DefaultCNIDir)

	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/containerd/go-cni").Output()
	require.NoError(t, err, "go list -m github.com/containerd/go-cni")
	theirs := strings.TrimSpace(string(out))
	ours := filepath.Join("..", "..", "pkg", "gocni")
	names := []string{"DefaultNetDir", "DefaultCNIDir"}
	for _, goos := range []string{"linux", "windows", "darwin", "freebsd"} {
		t.Run(goos, func(t *testing.T) {
			want := constsFor(t, theirs, goos, names)
			require.Len(t, want, len(names), "go-cni's constants for %s", goos)
			assert.Equal(t, want, constsFor(t, ours, goos, names))
		})
	}
	assert.NotEqual(t, constsFor(t, theirs, "windows", names), constsFor(t, theirs, "linux", names),
		"go-cni's Windows defaults differ from its Unix ones, so the comparison above can fail")
}

// constsFor returns the string constants named in the non-test Go files
// of dir that a build for goos compiles.
func constsFor(t *testing.T, dir, goos string, names []string) map[string]string {
	t.Helper()
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = goos, "amd64", false
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		ok, err := ctx.MatchFile(dir, filepath.Base(path))
		require.NoError(t, err)
		if !ok {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !want[id.Name] || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					got[id.Name] = v
				}
			}
			return true
		})
	}
	return got
}
