package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		file    string
		failing int
		want    []string // lines that must appear in the output
	}{
		{
			// The standard library's finding is called twice, once only at
			// the package and module level; x/sys is not called.
			file:    "stdlib-only.json",
			failing: 0,
			want: []string{
				"vulncheck: warning (standard library of go1.26.8): GO-2026-6603 stdlib@v1.26.8 (fixed in v1.26.9): HTTP/2 server memory exhaustion due to Trailer headers in net/http",
				"    for example examples/compat/main.go:124: github.com/seed-671fdd43/ocicni/examples/compat.main reaches net/http.http2Setting.String",
				": 0 called in required modules, 1 called in the standard library (a newer Go fixes them), 1 more not called, of which in required modules: GO-2026-5024 (golang.org/x/sys)\n",
			},
		},
		{
			file:    "module-called.json",
			failing: 1,
			want: []string{
				"vulncheck: FAIL: GO-2026-5024 golang.org/x/sys@v0.23.0 (fixed in v0.44.0): Something in golang.org/x/sys/unix",
				"    for example internal/fsutil/open_unix.go:30: github.com/seed-671fdd43/ocicni/internal/fsutil.OpenRegular reaches golang.org/x/sys/unix.Openat",
				": 1 called in required modules, 1 called in the standard library (a newer Go fixes them), 0 more not called\n",
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			rep, err := read(bytes.NewReader(in))
			require.NoError(t, err)
			var out bytes.Buffer
			assert.Equal(t, tc.failing, rep.print(&out))
			for _, w := range tc.want {
				assert.Contains(t, out.String(), w)
			}
			// One finding called from two places is listed once.
			assert.Equal(t, 1, strings.Count(out.String(), "GO-2026-6603 stdlib"))
		})
	}
}

func TestReadRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":  "govulncheck: loading packages: exit status 1\n",
		"no config": `{"progress":{"message":"x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := read(strings.NewReader(in))
			assert.Error(t, err)
		})
	}
}
