package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modes are the two ways a Root reaches a directory: openat2(2), and
// the walk by component that serves where the kernel has none.
var modes = []struct {
	name string
	walk bool
}{{"openat2", false}, {"walk", true}}

// useWalk makes the Roots of t walk by component, or use openat2(2).
func useWalk(t *testing.T, walk bool) {
	t.Helper()
	was := noOpenat2.Load()
	noOpenat2.Store(walk)
	t.Cleanup(func() { noOpenat2.Store(was) })
}

// Every method of a Root refuses a directory below it that is a symlink,
// naming it, and neither writes nor removes anything where it points.
func TestRootRefusesSymlinkedDirs(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			useWalk(t, m.walk)
			outside := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("keep"), 0o600))
			require.NoError(t, os.Mkdir(filepath.Join(outside, "sub"), 0o700))
			real := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(real, "ocicni"), 0o700))
			require.NoError(t, os.Symlink(outside, filepath.Join(real, "ocicni", "locks")))
			require.NoError(t, os.WriteFile(filepath.Join(real, "ocicni", "mine"), nil, 0o600))
			root := filepath.Join(t.TempDir(), "cni")
			require.NoError(t, os.Symlink(real, root)) // the root may be a symlink
			r := NewRoot(root)
			in := func(rel string) string { return filepath.Join(root, "ocicni", "locks", rel) }
			mine := filepath.Join(root, "ocicni", "mine")
			for _, tc := range []struct {
				name string
				do   func() error
			}{
				{"OpenFile", func() error {
					f, err := r.OpenFile(in("new"), os.O_RDWR|os.O_CREATE, 0o600)
					if err == nil {
						f.Close()
					}
					return err
				}},
				{"Remove", func() error { return r.Remove(in("victim")) }},
				{"RemoveAll", func() error { return r.RemoveAll(in("sub")) }},
				{"Rename into", func() error { return r.Rename(mine, in("moved")) }},
				{"Rename out of", func() error { return r.Rename(in("victim"), mine+"2") }},
				{"RenameNoReplace", func() error { return r.RenameNoReplace(mine, in("moved")) }},
				{"Link", func() error { return r.Link(mine, in("linked")) }},
				{"Mkdir", func() error { return r.Mkdir(in("dir"), 0o700) }},
				{"MkdirAll", func() error { return r.MkdirAll(in("a/b"), 0o700) }},
				{"MkdirAllDurable", func() error { return r.MkdirAllDurable(in("a/b"), 0o700) }},
				{"Chtimes", func() error { return r.Chtimes(in("victim"), time.Unix(1, 0), time.Unix(1, 0)) }},
				{"WriteDurable", func() error { return r.WriteDurable(in(""), "victim", ".tmp-*", []byte("x")) }},
				{"RemoveUnheld", func() error { _, err := r.RemoveUnheld(in("victim")); return err }},
				{"ReadDir", func() error { _, err := r.ReadDir(in("")); return err }},
				{"Lstat", func() error { _, err := r.Lstat(in("victim")); return err }},
				{"SyncDir", func() error { return r.SyncDir(in("")) }},
				{"Check", func() error { return r.Check(in("")) }},
			} {
				err := tc.do()
				require.ErrorIs(t, err, ErrSymlinked, tc.name)
				assert.Contains(t, err.Error(), filepath.Join(root, "ocicni", "locks"), tc.name)
			}
			assertOnly(t, outside, "sub", "victim")
			b, err := os.ReadFile(filepath.Join(outside, "victim"))
			require.NoError(t, err)
			assert.Equal(t, "keep", string(b))
		})
	}
}

// A Root's methods work on real directories, and never follow the last
// component either.
func TestRootWorks(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			useWalk(t, m.walk)
			outside := t.TempDir()
			root := t.TempDir()
			r := NewRoot(root)
			dir := filepath.Join(root, "ocicni", "configs")
			require.NoError(t, r.MkdirAllDurable(dir, 0o700))
			require.NoError(t, r.WriteDurable(dir, "a", ".tmp-*", []byte("one")))
			require.NoError(t, r.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")))
			require.ErrorIs(t, r.RenameNoReplace(filepath.Join(dir, "a"), filepath.Join(dir, "b")), fs.ErrExist)
			require.NoError(t, r.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "c")))
			des, err := r.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, des, 2)
			assert.Equal(t, []string{"a", "c"}, []string{des[0].Name(), des[1].Name()})
			fi, err := r.Lstat(filepath.Join(dir, "c"))
			require.NoError(t, err)
			n, _, ok := Links(fi)
			require.True(t, ok)
			assert.EqualValues(t, 2, n)

			// A symlink as the last component: opened never, removed itself.
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink(filepath.Join(outside, "target"), link))
			_, err = r.OpenFile(link, os.O_RDWR|os.O_CREATE, 0o600)
			require.Error(t, err)
			require.NoError(t, r.Remove(link))
			assertOnly(t, outside)

			_, err = r.Lstat(filepath.Join(outside, "x"))
			require.ErrorIs(t, err, ErrNotBeneath)
			require.NoError(t, r.RemoveAll(filepath.Join(root, "ocicni")))
			assertOnly(t, root)
		})
	}
}

// A directory swapped for a symlink while writes run is refused, never
// written through: the window between a check and a write that a path
// walk leaves is not there.
func TestRootNeverWritesThroughALinkSwappedIn(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			useWalk(t, m.walk)
			outside := t.TempDir()
			root := t.TempDir()
			r := NewRoot(root)
			state := filepath.Join(root, "ocicni")
			aside := filepath.Join(root, "real")
			require.NoError(t, os.Mkdir(state, 0o700))
			var stop atomic.Bool
			var swaps atomic.Int64
			var wg sync.WaitGroup
			t.Cleanup(func() { stop.Store(true); wg.Wait() })
			wg.Add(1)
			go func() { // the attacker: state is a real dir, then a link out, and again
				defer wg.Done()
				for !stop.Load() {
					if err := os.Rename(state, aside); err != nil {
						t.Error(err)
						return
					}
					if err := os.Symlink(outside, state); err != nil {
						t.Error(err)
						return
					}
					if err := errors.Join(os.Remove(state), os.Rename(aside, state)); err != nil {
						t.Error(err)
						return
					}
					swaps.Add(1)
				}
			}()
			var refused, wrote int
			for i := 0; i < 100000 && (wrote < 200 || refused < 200); i++ {
				err := swapRound(r, state, i)
				switch {
				case err == nil:
					wrote++
				case errors.Is(err, ErrSymlinked):
					refused++
				case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist):
					require.NoError(t, err, "write %d", i) // gone or not removed meanwhile: the swaps'

				}
			}
			stop.Store(true)
			wg.Wait()
			t.Logf("%d swaps: %d writes made, %d refused", swaps.Load(), wrote, refused)
			assertOnly(t, outside)
		})
	}
}

// swapRound makes the writes of round i below state: a durable write, a
// lock file, a directory.
func swapRound(r Root, state string, i int) error {
	switch i % 3 {
	case 0:
		return r.WriteDurable(state, "record", ".tmp-*", []byte("x"))
	case 1:
		f, err := r.OpenFile(filepath.Join(state, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err == nil {
			f.Close()
		}
		return err
	}
	err := r.Mkdir(filepath.Join(state, "locks"), 0o700)
	if err == nil {
		err = r.Remove(filepath.Join(state, "locks"))
	}
	return err
}

// assertOnly asserts that dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	got := []string{}
	for _, de := range des {
		got = append(got, de.Name())
	}
	if names == nil {
		names = []string{}
	}
	assert.Equal(t, names, got, "what %s holds", dir)
}
