package ocicni

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

// loadBound is how long a load of a few small files may take, even on a
// loaded machine. It bounds calls that must return; nothing waits for it
// to pass.
const loadBound = 5 * time.Second

// managerWithin is manager, failing the test instead of hanging when New
// does not return within d.
func (e *loaderEnv) managerWithin(t *testing.T, d time.Duration, opts ...Option) *Manager {
	t.Helper()
	m, err := newWithin(t, d, e.options(t, opts...)...)
	require.NoError(t, err)
	return m
}

// newWithin runs New in a goroutine and fails the test if it has not
// returned after d. It shuts the manager down at cleanup.
func newWithin(t *testing.T, d time.Duration, opts ...Option) (*Manager, error) {
	t.Helper()
	type started struct {
		m   *Manager
		err error
	}
	done := make(chan started, 1)
	go func() {
		m, err := New(opts...)
		done <- started{m, err}
	}()
	select {
	case s := <-done:
		if s.err == nil {
			t.Cleanup(func() { require.NoError(t, s.m.Shutdown()) })
		}
		return s.m, s.err
	case <-time.After(d):
		require.FailNow(t, "New did not return in time", "after %v", d)
		return nil, nil
	}
}

// mkfifo makes a FIFO at path. So that a failed test can finish, cleanup
// releases a reader stuck in open (the defect under test): it moves the
// FIFO away, leaves an empty regular file in its place for later opens,
// and opens the FIFO's write end without blocking, which gives the stuck
// reader EOF.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	t.Cleanup(func() {
		moved := path + ".released"
		if os.Rename(path, moved) != nil {
			return
		}
		_ = os.WriteFile(path, nil, 0o644) // best effort, as below
		if f, err := os.OpenFile(moved, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close() // ENXIO (no reader) is the normal case
		}
	})
}

// padded returns a valid conflist of exactly size bytes.
func padded(name string, size int) string {
	c := conflist(name, "1.0.0", "good")
	return c[:len(c)-1] + strings.Repeat(" ", size-len(c)) + "}"
}

func TestLoadSkipsFilesThatCannotBeReadSafely(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		make    func(t *testing.T, path string)
		wantErr error // nil: the file loads as network "x"
	}{
		{
			name:    "FIFO",
			file:    "10-x.conflist",
			make:    func(t *testing.T, p string) { t.Helper(); mkfifo(t, p) },
			wantErr: ErrNotRegularFile,
		},
		{
			name:    "symlink to the zero device",
			file:    "10-x.conf",
			make:    func(t *testing.T, p string) { t.Helper(); require.NoError(t, os.Symlink("/dev/zero", p)) },
			wantErr: ErrNotRegularFile,
		},
		{
			name: "symlink to a FIFO",
			file: "10-x.conflist",
			make: func(t *testing.T, p string) {
				t.Helper()
				t.Helper()
				t.Helper()
				mkfifo(t, p+".fifo")
				require.NoError(t, os.Symlink(p+".fifo", p))
			},
			wantErr: ErrNotRegularFile,
		},
		{
			name:    "symlink to a directory",
			file:    "10-x.conflist",
			make:    func(t *testing.T, p string) { t.Helper(); require.NoError(t, os.Symlink(t.TempDir(), p)) },
			wantErr: ErrNotRegularFile,
		},
		{
			name: "larger than MaxConfigFileSize",
			file: "10-x.conflist",
			make: func(t *testing.T, p string) {
				t.Helper()
				t.Helper()
				require.NoError(t, os.WriteFile(p, []byte(padded("x", MaxConfigFileSize+1)), 0o644))
			},
			wantErr: ErrFileTooLarge,
		},
		{
			name: "exactly MaxConfigFileSize",
			file: "10-x.conflist",
			make: func(t *testing.T, p string) {
				t.Helper()
				t.Helper()
				require.NoError(t, os.WriteFile(p, []byte(padded("x", MaxConfigFileSize)), 0o644))
			},
		},
		{
			name: "symlink to a regular file",
			file: "10-x.conflist",
			make: func(t *testing.T, p string) {
				t.Helper()
				t.Helper()
				target := filepath.Join(t.TempDir(), "x.conflist")
				require.NoError(t, os.WriteFile(target, []byte(conflist("x", "1.0.0", "good")), 0o644))
				require.NoError(t, os.Symlink(target, p))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoaderEnv(t)
			path := filepath.Join(e.confDir, tt.file)
			tt.make(t, path)
			writeConf(t, e.confDir, "50-ok.conflist", conflist("ok", "1.0.0", "good"))

			m := e.managerWithin(t, loadBound)
			if tt.wantErr == nil {
				assert.Equal(t, []string{"ok", "x"}, m.Networks())
				assert.Empty(t, m.Skipped())
				return
			}
			assert.Equal(t, []string{"ok"}, m.Networks(), "the file beside still loads")
			assert.Equal(t, "ok", m.GetDefaultNetworkName())
			skipped := m.Skipped()
			require.Len(t, skipped, 1)
			assert.Equal(t, path, skipped[0].File)
			require.ErrorIs(t, skipped[0], ErrInvalidConfig)
			require.ErrorIs(t, skipped[0], tt.wantErr)
		})
	}
}

// subFolderPlugins is what a list's plugin sub-folder holds in the tests
// below: plugin configs in a name order that differs from creation order,
// and files libcni ignores.
var subFolderPlugins = map[string]string{
	"20-second.conf":  `{"type":"other","which":"second"}`,
	"10-first.conf":   `{"type":"good","which":"first"}`,
	"30-ignored.json": `{"type":"other"}`,
}

func TestLoadSubFolderPluginsAsLibcniDoes(t *testing.T) {
	tests := []struct {
		name      string
		list      string
		extra     func(t *testing.T, sub string) // hostile additions, nil for none
		wantTypes []string
		wantSkip  error // a sub-folder file reported as skipped
		wantErr   error // the whole network skipped
	}{
		{
			name:      "appended after the inline plugins, in file name order",
			list:      `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`,
			wantTypes: []string{"good", "good", "other"},
		},
		{
			name:      "a list without plugins takes them all from the sub-folder",
			list:      `{"cniVersion":"1.0.0","name":"net"}`,
			wantTypes: []string{"good", "other"},
		},
		{
			name:      "loadOnlyInlinedPlugins ignores the sub-folder",
			list:      `{"cniVersion":"1.0.0","name":"net","loadOnlyInlinedPlugins":true,"plugins":[{"type":"good"}]}`,
			wantTypes: []string{"good"},
		},
		{
			name:      "a FIFO in the sub-folder is skipped with a reason",
			list:      `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`,
			extra:     func(t *testing.T, sub string) { t.Helper(); mkfifo(t, filepath.Join(sub, "15-fifo.conf")) },
			wantTypes: []string{"good", "good", "other"},
			wantSkip:  ErrNotRegularFile,
		},
		{
			name: "a symlink to the zero device in the sub-folder is skipped with a reason",
			list: `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`,
			extra: func(t *testing.T, sub string) {
				t.Helper()
				require.NoError(t, os.Symlink("/dev/zero", filepath.Join(sub, "15-zero.conf")))
			},
			wantTypes: []string{"good", "good", "other"},
			wantSkip:  ErrNotRegularFile,
		},
		{
			name: "an oversized plugin config makes the network invalid",
			list: `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`,
			extra: func(t *testing.T, sub string) {
				t.Helper()
				big := `{"type":"good"` + strings.Repeat(" ", MaxConfigFileSize) + `}`
				require.NoError(t, os.WriteFile(filepath.Join(sub, "15-big.conf"), []byte(big), 0o644))
			},
			wantErr: ErrFileTooLarge,
		},
		{
			name: "a plugin config without a type makes the network invalid",
			list: `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`,
			extra: func(t *testing.T, sub string) {
				t.Helper()
				require.NoError(t, os.WriteFile(filepath.Join(sub, "15-untyped.conf"), []byte(`{}`), 0o644))
			},
			wantErr: ErrInvalidConfig,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoaderEnv(t)
			path := writeConf(t, e.confDir, "10-net.conflist", tt.list)
			sub := filepath.Join(e.confDir, "net")
			require.NoError(t, os.Mkdir(sub, 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(sub, "99-dir.conf"), 0o755))
			for name, content := range subFolderPlugins {
				writeConf(t, sub, name, content)
			}
			var want *libcni.NetworkConfigList
			if tt.extra == nil {
				// Without hostile files, libcni reads the same list.
				var err error
				want, err = libcni.NetworkConfFromFile(path)
				require.NoError(t, err)
			} else {
				tt.extra(t, sub)
			}

			m := e.managerWithin(t, loadBound)
			if tt.wantErr != nil {
				assert.Empty(t, m.Networks())
				err := skippedFile(m, path)
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, ErrInvalidConfig)
				return
			}
			require.Equal(t, []string{"net"}, m.Networks())
			assert.Equal(t, tt.wantTypes, pluginTypes(m, "net"))
			if want != nil {
				assert.Equal(t, pluginBytesOf(want), pluginBytesOf(m.e.snapshot().Network("net").List),
					"the same plugins in the same order as libcni")
			}
			if tt.wantSkip == nil {
				assert.Empty(t, m.Skipped())
				return
			}
			skipped := m.Skipped()
			require.Len(t, skipped, 1)
			assert.Equal(t, sub, filepath.Dir(skipped[0].File))
			assert.Equal(t, "net", skipped[0].Network)
			require.ErrorIs(t, skipped[0], tt.wantSkip)
		})
	}
}

func pluginBytesOf(list *libcni.NetworkConfigList) []string {
	var out []string
	for _, p := range list.Plugins {
		out = append(out, string(bytes.TrimSpace(p.Bytes)))
	}
	return out
}

func TestReloadSeesSubFolderChanges(t *testing.T) {
	e := newLoaderEnv(t)
	writeConf(t, e.confDir, "10-net.conflist", `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good"}]}`)
	m := e.manager(t)
	require.Equal(t, []string{"good"}, pluginTypes(m, "net"))

	sub := filepath.Join(e.confDir, "net")
	require.NoError(t, os.Mkdir(sub, 0o755))
	writeConf(t, sub, "10-x.conf", `{"type":"other"}`)
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, []string{"good", "other"}, pluginTypes(m, "net"))
	require.NoError(t, os.Remove(filepath.Join(sub, "10-x.conf")))
	require.NoError(t, m.Reload(context.Background()))
	assert.Equal(t, []string{"good"}, pluginTypes(m, "net"))
}

func TestLoadRejectsNamesAndTypesLibcniWouldNot(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"name with a leading dash", conflist("-net", "1.0.0", "good")},
		{"name with a space", conflist("my net", "1.0.0", "good")},
		{"name with a colon", conflist("a:b", "1.0.0", "good")},
		{"name with a slash", conflist("a/b", "1.0.0", "good")},
		{"name escaping the conf dir", conflist("../x", "1.0.0", "good")},
		{"name dot", conflist(".", "1.0.0", "good")},
		{"name with dot-dot", conflist("a..b", "1.0.0", "good")},
		{"name too long for a cache file name", conflist(strings.Repeat("n", 101), "1.0.0", "good")},
		{"type escaping the bin dir", conflist("net", "1.0.0", "../escape")},
		{"absolute type", conflist("net", "1.0.0", "/bin/true")},
		{"type dot-dot", conflist("net", "1.0.0", "..")},
		{"type dot", conflist("net", "1.0.0", ".")},
		{"type with a backslash", conflist("net", "1.0.0", `a\b`)},
		{"type with a NUL", `{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"good\u0000"}]}`},
		{"type with a newline", conflist("net", "1.0.0", "good\n")},
		{"second plugin's type escaping", conflist("net", "1.0.0", "good", "../escape")},
		{"conf file type escaping", `{"cniVersion":"1.0.0","name":"net","type":"../escape"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLoaderEnv(t)
			// An executor that finds any name, "../escape" (a binary
			// outside the bin dir) and "/bin/true" included: the manager
			// must refuse such types itself.
			e.exec.SetFindMode(fakecni.FindUnchecked)
			ext := ".conflist"
			if !strings.Contains(tt.content, `"plugins"`) {
				ext = ".conf"
			}
			path := writeConf(t, e.confDir, "10-net"+ext, tt.content)
			m := e.manager(t)
			assert.Empty(t, m.Networks())
			require.ErrorIs(t, skippedFile(m, path), ErrInvalidConfig)
		})
	}
}
