package ocicni

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerProcessNetNSPath checks the path walk of checkPerProcessPath on
// real paths: /proc and links in a temp dir. It needs no root.
func TestPerProcessNetNSPath(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc")
	}
	t.Parallel()
	dir := t.TempDir()
	link := func(name, target string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.Symlink(target, p))
		return p
	}
	rel := func(from, to string) string {
		t.Helper()
		r, err := filepath.Rel(from, to)
		require.NoError(t, err)
		return r
	}
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "self"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "self", "net"), nil, 0o600))

	const (
		perProcess = "a per-process path"
		tooMany    = "symbolic links (a loop?)"
	)
	tests := []struct {
		name string
		path string
		want string // a part of the refusal's Reason; "" when accepted
	}{
		{name: "/proc/self", path: "/proc/self/ns/net", want: "names " + perProcess + " (/proc/self)"},
		{name: "/proc/thread-self", path: "/proc/thread-self/ns/net", want: "(/proc/thread-self)"},
		{name: "a thread of /proc/self", path: "/proc/self/task/1/ns/net", want: perProcess},
		{name: "/proc/self itself", path: "/proc/self", want: perProcess},
		{name: "double slash", path: "/proc//self/ns/net", want: perProcess},
		{name: "dot", path: "/proc/./self/ns/net", want: perProcess},
		{name: "dot-dot", path: "/proc/1/../self/ns/net", want: perProcess},
		{name: "procfs relative link", path: "/proc/net/dev", want: "leads through symbolic links to " + perProcess},
		{name: "absolute link", path: link("abs", "/proc/self/ns/net"), want: "leads through symbolic links to " + perProcess},
		{name: "relative link", path: link("rel", rel(dir, "/proc/self/ns/net")), want: perProcess},
		{name: "link to thread-self", path: link("thread", "/proc/thread-self/ns/net"), want: "(/proc/thread-self)"},
		{name: "link to /proc, then self", path: link("proc", "/proc") + "/self/ns/net", want: perProcess},
		{
			name: "directory chain", want: perProcess,
			path: func() string {
				link("d2", rel(dir, "/proc/self/ns"))
				return link("d1", "d2") + "/net"
			}(),
		},
		{name: "/dev/fd/0", path: "/dev/fd/0", want: perProcess},
		{name: "/dev/stdin", path: "/dev/stdin", want: perProcess},
		{name: "link to /dev/fd", path: link("fd", "/dev/fd/3"), want: perProcess},
		{
			// Only links in procfs are magic: elsewhere a target like
			// net:[1] is a file name, here a link to /proc/self.
			name: "net:[1] outside procfs", want: perProcess,
			path: func() string {
				link("net:[1]", "/proc/self/ns/net")
				return link("fake-magic", "net:[1]")
			}(),
		},
		{
			name: "loop", want: tooMany,
			path: func() string {
				link("loop-b", "loop-a")
				return link("loop-a", "loop-b") + "/net"
			}(),
		},
		{name: "link to itself", path: link("me", "me"), want: tooMany},

		{name: "init's netns", path: "/proc/1/ns/net"},
		{name: "the manager's pid", path: "/proc/" + strconv.Itoa(os.Getpid()) + "/ns/net"},
		{name: "link to a pid path", path: link("pid1", "/proc/1/ns/net")},
		{name: "past a magic link", path: "/proc/1/ns/net/x"},
		{name: "plain file", path: file},
		{name: "a directory named self", path: filepath.Join(dir, "self", "net")},
		{name: "link to a plain file", path: link("tofile", "plain")},
		{name: "missing under /var/run/netns", path: "/var/run/netns/ocicni-test-does-not-exist"},
		{name: "dangling link", path: link("dangling", "nowhere/self")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkPerProcessPath(tt.path)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var iae *InvalidArgumentError
			require.ErrorAs(t, err, &iae)
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Equal(t, "netns path", iae.Field)
			assert.Equal(t, tt.path, iae.Value)
			assert.Contains(t, iae.Reason, tt.want)
		})
	}
}

// The walk applies through checkNetNSPath to setup (checkNetNS) and to
// caller and stored paths (usableStoredNetNS); unclean spellings are refused
// before it, as not clean.
func TestNetNSPathRefusesPerProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc")
	}
	t.Parallel()
	dir := t.TempDir()
	l := filepath.Join(dir, "ns")
	require.NoError(t, os.Symlink("/proc/self/ns/net", l))
	for _, p := range []string{"/proc/self/ns/net", "/proc/thread-self/ns/net", "/dev/fd/0", l} {
		require.ErrorIs(t, checkNetNS(p), ErrInvalidArgument, p)
		ns, err := usableStoredNetNS(p)
		require.ErrorIs(t, err, ErrInvalidArgument, p)
		assert.Empty(t, ns, p)
	}
	err := checkNetNSPath("/proc//self/ns/net")
	var iae *InvalidArgumentError
	require.ErrorAs(t, err, &iae)
	assert.Equal(t, "is not a clean path", iae.Reason)
}
