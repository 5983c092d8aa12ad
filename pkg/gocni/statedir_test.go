//go:build unix

package cni_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/gocni"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni/ocicnitest"
)

// A face's private conf dir lives under <TMPDIR>/ocicni-gocni-<euid>,
// locked while the face lives. A runtime that never calls Shutdown (as
// containerd, which knows only go-cni's interface) leaves it behind: the
// next New removes it once its lock is free, and never a live face's.
func TestFaceDirsOfGoneFacesAreSwept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "net", "1.0.0", "bridge")
	base := filepath.Join(tmp, "ocicni-gocni-"+strconv.Itoa(os.Geteuid()))

	live := newFace(t, env, cni.WithDefaultConf)
	gone := filepath.Join(base, "face-gone")
	require.NoError(t, os.MkdirAll(filepath.Join(gone, "net.d"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(gone, "lock"), nil, 0o600))
	faces := func() []string {
		des, err := os.ReadDir(base)
		require.NoError(t, err)
		var out []string
		for _, de := range des {
			out = append(out, de.Name())
		}
		return out
	}
	require.Len(t, faces(), 2)
	fi, err := os.Stat(base)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	next := newFace(t, env, cni.WithDefaultConf)
	left := faces()
	assert.Len(t, left, 2, "the live face's dir and the new one's")
	assert.NotContains(t, left, "face-gone", "the gone face's dir was swept")
	require.NoError(t, live.Status())
	require.NoError(t, next.Status())

	require.NoError(t, next.Shutdown())
	require.NoError(t, live.Shutdown())
	assert.Empty(t, faces(), "Shutdown removes a face's dir")
}

// A base dir that others can write is not trusted: the face falls back
// to a fresh temporary dir of its own.
func TestFaceDirUntrustedBase(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	base := filepath.Join(tmp, "ocicni-gocni-"+strconv.Itoa(os.Geteuid()))
	require.NoError(t, os.Mkdir(base, 0o777))
	require.NoError(t, os.Chmod(base, 0o777))
	env := ocicnitest.NewEnv(t)
	env.WriteConflist(t, "net", "1.0.0", "bridge")
	f := newFace(t, env, cni.WithDefaultConf)
	des, err := os.ReadDir(base)
	require.NoError(t, err)
	assert.Empty(t, des, "nothing written into the untrusted dir")
	require.NoError(t, f.Status())
}
