package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRootCheck(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, root string)
		wantBad string // the path named, relative to root; "" for none
	}{
		{name: "nothing yet", make: func(*testing.T, string) {}},
		{name: "real dirs", make: func(t *testing.T, root string) {
			t.Helper()
			require.NoError(t, os.MkdirAll(filepath.Join(root, "state", "locks"), 0o700))
		}},
		{name: "state dir symlinked", wantBad: "state", make: func(t *testing.T, root string) {
			t.Helper()
			require.NoError(t, os.Symlink(outside, filepath.Join(root, "state")))
		}},
		{name: "sub-dir symlinked", wantBad: "state/locks", make: func(t *testing.T, root string) {
			t.Helper()
			require.NoError(t, os.Mkdir(filepath.Join(root, "state"), 0o700))
			require.NoError(t, os.Symlink(outside, filepath.Join(root, "state", "locks")))
		}},
		{name: "a file where a dir goes: not a link", make: func(t *testing.T, root string) {
			t.Helper()
			require.NoError(t, os.WriteFile(filepath.Join(root, "results"), nil, 0o600))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			real := t.TempDir()
			tc.make(t, real)
			link := filepath.Join(t.TempDir(), "root")
			require.NoError(t, os.Symlink(real, link))
			for _, root := range []string{real, link} { // the root itself may be a symlink
				r := NewRoot(root)
				err := r.Check(filepath.Join(root, "state/locks"), filepath.Join(root, "state/configs"), filepath.Join(root, "results"))
				if tc.wantBad == "" {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, ErrSymlinked)
				assert.Contains(t, err.Error(), filepath.Join(root, filepath.FromSlash(tc.wantBad)))
			}
		})
	}
}
