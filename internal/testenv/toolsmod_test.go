package testenv

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goModTools returns the package paths of the tool directives of a go.mod
// file, in both forms: "tool path" and a "tool ( ... )" block. It is a
// small parser rather than golang.org/x/mod/modfile, which is not in this
// module's graph.
func goModTools(data []byte) ([]string, error) {
	var tools []string
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case inBlock && fields[0] == ")":
			inBlock = false
			continue
		case inBlock:
		case fields[0] == "tool" && len(fields) == 2 && fields[1] == "(":
			inBlock = true
			continue
		case fields[0] == "tool" && len(fields) == 2:
			fields = fields[1:]
		default:
			continue
		}
		p := fields[0]
		if unq, err := strconv.Unquote(p); err == nil {
			p = unq
		}
		tools = append(tools, p)
	}
	return tools, sc.Err()
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// binaryName is the name go build gives the binary of package p: its last
// element, or the one before a major version suffix.
func binaryName(p string) string {
	base := path.Base(p)
	if dir := path.Dir(p); majorVersion.MatchString(base) && dir != "." {
		return path.Base(dir)
	}
	return base
}

func TestGoModTools(t *testing.T) {
	tests := []struct {
		name  string
		gomod string
		want  []string
	}{
		{name: "none", gomod: "module m\n\ngo 1.24\n\nrequire x.org/y v1.0.0\n"},
		{name: "single line", gomod: "module m\ntool example.com/cmd/a // a comment\n", want: []string{"example.com/cmd/a"}},
		{name: "quoted", gomod: "module m\ntool \"example.com/cmd/q\"\n", want: []string{"example.com/cmd/q"}},
		{
			name:  "block with comments and blank lines",
			gomod: "module m\n\ntool (\n\t// the first\n\texample.com/cmd/a\n\n\texample.com/cmd/b // the second\n)\n\nrequire (\n\texample.com v1.0.0\n)\n",
			want:  []string{"example.com/cmd/a", "example.com/cmd/b"},
		},
		{name: "both forms", gomod: "tool example.com/x\ntool (\nexample.com/y\n)\n", want: []string{"example.com/x", "example.com/y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := goModTools([]byte(tt.gomod))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	assert.Equal(t, "bridge", binaryName("github.com/containernetworking/plugins/plugins/main/bridge"))
	assert.Equal(t, "golangci-lint", binaryName("github.com/golangci/golangci-lint/v2/cmd/golangci-lint"))
	assert.Equal(t, "tool", binaryName("example.com/tool/v3"))
}

// TestReferencePluginsMatchToolsGoMod: ReferencePlugins names exactly the
// binaries that "go build tool" builds in the tools module, so that
// BuildPlugins neither misses a plugin nor waits for one never built.
func TestReferencePluginsMatchToolsGoMod(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "tools", "go.mod"))
	require.NoError(t, err)
	tools, err := goModTools(data)
	require.NoError(t, err)
	require.NotEmpty(t, tools, "tools/go.mod has tool directives")
	var built []string
	for _, p := range tools {
		built = append(built, binaryName(p))
	}
	slices.Sort(built)
	listed := slices.Clone(ReferencePlugins)
	slices.Sort(listed)
	assert.Equal(t, built, listed, "ReferencePlugins must list the binaries of tools/go.mod's tool directives")
}
