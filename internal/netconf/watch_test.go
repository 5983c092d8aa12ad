//go:build !nowatchtests

package netconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchRelevant(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	confDir := filepath.Join(root, "etc", "net.d")
	binDir := filepath.Join(root, "bin")
	for _, d := range []string{confDir, binDir, filepath.Join(confDir, "newdir")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	w := &watcher{
		confDir: confDir,
		targets: []string{confDir, binDir},
		subDirs: map[string]bool{filepath.Join(confDir, "mynet"): true},
	}
	tests := []struct {
		name string
		path string
		op   fsnotify.Op
		want bool
	}{
		{name: "conflist", path: filepath.Join(confDir, "10-a.conflist"), op: fsnotify.Create, want: true},
		{name: "conf", path: filepath.Join(confDir, "10-a.conf"), op: fsnotify.Write, want: true},
		{name: "json removed", path: filepath.Join(confDir, "10-a.json"), op: fsnotify.Remove, want: true},
		{name: "staged file", path: filepath.Join(confDir, "10-a.conflist.tmp"), op: fsnotify.Create, want: false},
		{name: "staged file renamed away", path: filepath.Join(confDir, ".10-a.conflist.1234"), op: fsnotify.Rename, want: false},
		{name: "new sub-folder", path: filepath.Join(confDir, "newdir"), op: fsnotify.Create, want: true},
		{name: "known sub-folder removed", path: filepath.Join(confDir, "mynet"), op: fsnotify.Remove, want: true},
		{name: "plugin config in a sub-folder", path: filepath.Join(confDir, "mynet", "10-tuning.conf"), op: fsnotify.Write, want: true},
		{name: "other file in a sub-folder", path: filepath.Join(confDir, "mynet", "10-tuning.conf.swp"), op: fsnotify.Write, want: false},
		{name: "plugin binary", path: filepath.Join(binDir, "bridge"), op: fsnotify.Create, want: true},
		{name: "conf dir itself", path: confDir, op: fsnotify.Remove, want: true},
		{name: "ancestor of the conf dir", path: filepath.Join(root, "etc"), op: fsnotify.Create, want: true},
		{name: "unrelated", path: filepath.Join(root, "elsewhere.conflist"), op: fsnotify.Create, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, w.relevant(fsnotify.Event{Name: tt.path, Op: tt.op}))
		})
	}
}
