//go:build unix

package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RemoveUnheld removes a temporary file that no write holds, and leaves
// one that a write in flight holds, a name that is gone, and what is not
// a regular file.
func TestRemoveUnheld(t *testing.T) {
	dir := t.TempDir()
	t.Run("left by a crash", func(t *testing.T) {
		p := filepath.Join(dir, ".tmp-crashed")
		require.NoError(t, os.WriteFile(p, []byte("half"), 0o600))
		ok, err := NewRoot(dir).RemoveUnheld(p)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.NoFileExists(t, p)
	})
	t.Run("gone", func(t *testing.T) {
		ok, err := NewRoot(dir).RemoveUnheld(filepath.Join(dir, ".tmp-never"))
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(dir, "target")
		require.NoError(t, os.WriteFile(target, nil, 0o600))
		p := filepath.Join(dir, ".tmp-link")
		require.NoError(t, os.Symlink(target, p))
		ok, err := NewRoot(dir).RemoveUnheld(p)
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = os.Lstat(p)
		require.NoError(t, err, "the symlink is left")
		assert.FileExists(t, target)
	})
	t.Run("fifo", func(t *testing.T) {
		p := filepath.Join(dir, ".tmp-fifo")
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		ok, err := NewRoot(dir).RemoveUnheld(p)
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = os.Lstat(p)
		require.NoError(t, err, "the fifo is left")
	})
	t.Run("held by a write", func(t *testing.T) {
		held := make(chan string)
		resume := make(chan struct{})
		TestHookTempHeld = func(p string) {
			held <- p
			<-resume
		}
		t.Cleanup(func() { TestHookTempHeld = nil })
		done := make(chan error, 1)
		go func() { done <- NewRoot(dir).WriteDurable(dir, "name", ".tmp-*", []byte("data")) }()
		p := <-held
		ok, err := NewRoot(dir).RemoveUnheld(p)
		require.NoError(t, err)
		assert.False(t, ok, "a write in flight holds it")
		assert.FileExists(t, p)
		close(resume)
		require.NoError(t, <-done)
		b, err := os.ReadFile(filepath.Join(dir, "name"))
		require.NoError(t, err)
		assert.Equal(t, "data", string(b))
		assert.NoFileExists(t, p, "renamed")
	})
}

// Writes racing a sweep that removes every temporary file it can: every
// write succeeds with its content in place, whether its temporary file has
// a fixed name or a pattern, and the sweep removes none that a write
// holds (a write whose file it removed before the write locked it creates
// another). Without the writes' locks, the sweep removes files being
// written and their renames fail.
func TestWritesRacingRemoveUnheld(t *testing.T) {
	dir := t.TempDir()
	const writers, writes = 4, 200
	var stop atomic.Bool
	var swept atomic.Int64
	sweeper := make(chan error, 1)
	go func() {
		for !stop.Load() {
			des, err := os.ReadDir(dir)
			if err != nil {
				sweeper <- err
				return
			}
			for _, de := range des {
				if !strings.HasPrefix(de.Name(), ".tmp-") {
					continue
				}
				ok, err := NewRoot(dir).RemoveUnheld(filepath.Join(dir, de.Name()))
				if err != nil {
					sweeper <- err
					return
				}
				if ok {
					swept.Add(1)
				}
			}
		}
		sweeper <- nil
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*writes)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmp := fmt.Sprintf(".tmp-%d", w) // a record's: one name, reused
			if w%2 == 1 {
				tmp = ".tmp-config-*" // a saved config's: a new name each time
			}
			for i := range writes {
				name := fmt.Sprintf("file-%d", w)
				want := fmt.Sprintf("%d/%d", w, i)
				if err := NewRoot(dir).WriteDurable(dir, name, tmp, []byte(want)); err != nil {
					errs <- err
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, name))
				switch {
				case err != nil:
					errs <- err
				case string(b) != want:
					errs <- fmt.Errorf("%s holds %q, want %q", name, b, want)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	require.NoError(t, <-sweeper)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	left, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file outlives its write")
	t.Logf("the sweep removed %d temporary files before their writes locked them", swept.Load())
}
