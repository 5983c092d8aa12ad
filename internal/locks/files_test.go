//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package locks

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/testenv"
)

// lockAsync runs fn (a lock call) in a goroutine and returns its error's
// channel and where it puts the lock, to be read once the error came.
func lockAsync(fn func() (*FileLock, error)) (<-chan error, **FileLock) {
	done := make(chan error, 1)
	var l *FileLock
	go func() {
		var err error
		l, err = fn()
		done <- err
	}()
	return done, &l
}

// Two holders of one key exclude each other, whether they share a
// Files or not: flock locks belong to the open file.
func TestFilesKeyExcludes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		second *Files
	}{
		{"same Files", nil},
		{"another Files on the dir", NewFiles(dir, fsutil.Root{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := NewFiles(dir, fsutil.Root{})
			second := tc.second
			if second == nil {
				second = first
			}
			key := "sb-" + filepath.Base(t.Name())
			l, err := first.Lock(context.Background(), key)
			require.NoError(t, err)
			_, err = second.TryLock(key)
			require.ErrorIs(t, err, ErrBusy)
			done, l2 := lockAsync(func() (*FileLock, error) { return second.Lock(context.Background(), key) })
			testenv.RequirePending(t, done, "a second holder got the lock while the first held it")
			l.Unlock(false)
			require.NoError(t, testenv.RequireDone(t, done, "the waiter, once the lock was released"))
			assert.Equal(t, first.Owner(), (*l2).Stamp().Owner, "the first holder's release is stamped")
			(*l2).Unlock(true)
			_, err = os.Stat(filepath.Join(dir, key))
			require.ErrorIs(t, err, os.ErrNotExist, "Unlock(true) removes the key's file")
		})
	}
}

// A waiter handed the lock of a file that its holder removed opens the
// file again, so two holders never hold one key at once through a
// removed file and a new one. Many holders that remove the file as they
// leave take turns: the count of holders inside never exceeds one.
func TestFilesRemovedFileIsNotHeld(t *testing.T) {
	t.Parallel()
	fl := NewFiles(t.TempDir(), fsutil.Root{})
	var inside, most atomic.Int32
	done := make(chan error, 8)
	for range 8 {
		go func() {
			for i := range 50 {
				l, err := fl.Lock(context.Background(), "sb")
				if err != nil {
					done <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				for range 20 { // long enough for a second holder to come in
					runtime.Gosched()
				}
				inside.Add(-1)
				l.Unlock(i%2 == 0)
			}
			done <- nil
		}()
	}
	for range 8 {
		require.NoError(t, testenv.RequireDone(t, done, "a holder's turns"))
	}
	assert.Equal(t, int32(1), most.Load(), "holders of one key at once")
}

// A lock taken by another process excludes this one, and its death
// releases it; its release stamp names it.
func TestFilesAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fl := NewFiles(dir, fsutil.Root{})
	child := startHolder(t, dir, "sb", "stamp")
	require.Equal(t, "stamped", child.next(t))
	l, err := fl.TryLock("sb")
	require.NoError(t, err, "the other process released the lock")
	s := l.Stamp()
	assert.True(t, strings.HasPrefix(s.Owner, strconv.Itoa(child.cmd.Process.Pid)+"-"), "the stamp %q names the other process", s.Owner)
	assert.WithinDuration(t, time.Now(), s.At, time.Minute)
	require.NoError(t, child.cmd.Wait())
	assert.False(t, s.Live(), "the stamp of a process that exited is not live")
	l.Unlock(false)

	child = startHolder(t, dir, "sb", "hold")
	require.Equal(t, "holding", child.next(t))
	_, err = fl.TryLock("sb")
	require.ErrorIs(t, err, ErrBusy, "the other process holds it")
	require.NoError(t, child.cmd.Process.Kill())
	_ = child.cmd.Wait() // killed
	l, err = fl.Lock(context.Background(), "sb")
	require.NoError(t, err, "a dead holder's lock is released")
	assert.Equal(t, fl.Owner(), l.Stamp().Owner, "a holder that died stamps nothing")
	l.Unlock(true)
}

// A child process that inherited a held lock's file holds the lock after
// its holder is gone, until it exits, and the holder's Unlock releases
// it for both. It does not run in parallel: a child that another test
// forks meanwhile holds a copy of every open file, the lock's included,
// until it execs, so the lock would not be free at once after this
// test's child exits.
func TestFilesInheritedByAChild(t *testing.T) {
	dir := t.TempDir()
	fl := NewFiles(dir, fsutil.Root{})
	inherit := func() (*FileLock, *exec.Cmd) {
		l, err := NewFiles(dir, fsutil.Root{}).Lock(context.Background(), "sb")
		require.NoError(t, err)
		cmd := exec.Command("sleep", "60")
		cmd.ExtraFiles = []*os.File{l.Inheritable()}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return l, cmd
	}

	l, cmd := inherit()
	_ = l.f.Close() // as when the holder's process dies
	_, err := fl.TryLock("sb")
	require.ErrorIs(t, err, ErrBusy, "the child holds it")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // killed
	got, err := fl.TryLock("sb")
	require.NoError(t, err, "the child's exit released it")
	got.Unlock(false)

	l, _ = inherit()
	l.Unlock(false)
	got, err = fl.TryLock("sb")
	require.NoError(t, err, "Unlock released it for the child too")
	got.Unlock(true)
}

// The node gate: readers share it; a writer gets it only with no reader
// in, holds new readers back while it waits, gives up after its hold,
// and readers wait for a writer that holds it.
//
// Not parallel: a process that another test forks holds a copy of every
// open file until it execs, so a lock file closed here may stay locked
// for a moment after, and the probe below would take that for the
// writer's turnstile.
func TestFilesNodeGate(t *testing.T) {
	bg := context.Background()
	fl := NewFiles(t.TempDir(), fsutil.Root{})
	r1, err := fl.RLockNode(bg)
	require.NoError(t, err)
	r2, err := fl.RLockNode(bg)
	require.NoError(t, err, "readers share the node gate")

	_, err = fl.LockNode(bg, time.Millisecond)
	require.ErrorIs(t, err, ErrBusy, "a writer gives up after its hold while readers are in")

	wdone, w := lockAsync(func() (*FileLock, error) { return fl.LockNode(bg, time.Hour) })
	// The writer closes the turnstile: a new reader waits.
	require.Eventually(t, func() bool {
		l, err := fl.RLockNode(ctxEnded(t))
		if err == nil { // in before the writer closed the turnstile: out again
			l.Unlock(false)
		}
		return errors.Is(err, context.DeadlineExceeded)
	}, testenv.BarrierTimeout, time.Millisecond, "a new reader is held back by a waiting writer")
	r3done, r3 := lockAsync(func() (*FileLock, error) { return fl.RLockNode(bg) })
	testenv.RequirePending(t, wdone, "the writer got in while readers held the gate")
	r1.Unlock(false)
	r2.Unlock(false)
	require.NoError(t, testenv.RequireDone(t, wdone, "the writer, once the readers left"))
	testenv.RequirePending(t, r3done, "a reader got in while the writer held the gate")
	(*w).Unlock(false)
	require.NoError(t, testenv.RequireDone(t, r3done, "the held-back reader, after the writer"))
	(*r3).Unlock(false)
}

// A waiter whose context ends gets its error and holds nothing; bad keys
// are refused.
func TestFilesWaitEndsAndBadKeys(t *testing.T) {
	t.Parallel()
	fl := NewFiles(t.TempDir(), fsutil.Root{})
	l, err := fl.Lock(context.Background(), "sb")
	require.NoError(t, err)
	_, err = fl.Lock(ctxEnded(t), "sb")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	l.Unlock(false)
	l, err = fl.TryLock("sb")
	require.NoError(t, err, "the waiter that gave up holds nothing")
	l.Unlock(false)
	for _, key := range []string{"", ".node", "../x", "a/b"} {
		_, err := fl.TryLock(key)
		assert.Error(t, err, "key %q", key)
	}
}

// Recent lists the keys whose lock changed since a time, with their
// stamps, and leaves out the node gate's files and older keys.
func TestFilesRecent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := NewFiles(dir, fsutil.Root{}), NewFiles(dir, fsutil.Root{})
	old, err := a.Lock(context.Background(), "old")
	require.NoError(t, err)
	old.Unlock(false)
	past := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "old"), past, past))
	since := time.Now().Add(-time.Second)
	l, err := b.Lock(context.Background(), "new")
	require.NoError(t, err)
	l.Unlock(false)
	held, err := a.Lock(context.Background(), "held")
	require.NoError(t, err)
	defer held.Unlock(true)
	node, err := a.RLockNode(context.Background())
	require.NoError(t, err)
	defer node.Unlock(false)

	got, err := a.Recent(since)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"new", "held"}, keysOf(got))
	assert.Equal(t, b.Owner(), got["new"].Owner)
	assert.Equal(t, Stamp{}, got["held"], "a held file that nobody released has no stamp")

	assert.True(t, got["new"].Live(), "the owner of a Files not retired, in this process, is live")
	b.Retire()
	assert.False(t, got["new"].Live(), "a retired owner is not")
	assert.False(t, Stamp{}.Live(), "nor is nobody")

	none, err := NewFiles(filepath.Join(dir, "missing"), fsutil.Root{}).Recent(since)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func keysOf(m map[string]Stamp) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ctxEnded returns a context that ends at once.
func ctxEnded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	t.Cleanup(cancel)
	<-ctx.Done()
	return ctx
}

// holderEnv names the job of a helper process: "dir key hold|stamp".
const holderEnv = "OCICNI_LOCKS_HOLDER"

type holderProc struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
}

// startHolder starts this test binary as a process that takes key's lock
// in dir as owner "child" and then either holds it until killed (hold)
// or releases it (stamp), saying which on its stdout.
func startHolder(t *testing.T, dir, key, job string) *holderProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFilesHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir+" "+key+" "+job)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // killed, or done
	})
	return &holderProc{cmd: cmd, lines: bufio.NewScanner(out)}
}

// next returns the helper's next word on its stdout.
func (h *holderProc) next(t *testing.T) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		for h.lines.Scan() {
			if w := h.lines.Text(); w == "holding" || w == "stamped" {
				line <- w
				return
			}
		}
		close(line)
	}()
	w, ok := <-line
	require.True(t, ok, "the helper process said nothing")
	return w
}

// TestFilesHolderProcess is the helper process of startHolder; run
// alone, it does nothing.
func TestFilesHolderProcess(t *testing.T) {
	job := os.Getenv(holderEnv)
	if job == "" {
		t.Skip("the helper process of TestFilesAcrossProcesses")
	}
	f := strings.Fields(job)
	require.Len(t, f, 3, "job %q", job)
	dir, key, what := f[0], f[1], f[2]
	l, err := NewFiles(dir, fsutil.Root{}).Lock(context.Background(), key)
	require.NoError(t, err)
	if what == "stamp" {
		l.Unlock(false)
		_, _ = os.Stdout.WriteString("stamped\n")
		return
	}
	_, _ = os.Stdout.WriteString("holding\n")
	select {} // until killed
}

// A key whose file is removed leaves it as a spare, and the next new key
// takes that file instead of creating one, with no stamp of the former
// key's; the spares are no keys.
func TestKeyFilesReused(t *testing.T) {
	if !reuseFiles {
		t.Skip("lock files are not reused here")
	}
	t.Parallel()
	dir := t.TempDir()
	fl := NewFiles(dir, fsutil.Root{})
	a, err := fl.Lock(context.Background(), "a")
	require.NoError(t, err)
	a.Unlock(false) // stamped
	a, err = fl.Lock(context.Background(), "a")
	require.NoError(t, err)
	require.NotEmpty(t, a.Stamp().Owner)
	held, err := a.f.Stat()
	require.NoError(t, err)
	a.Unlock(true)
	keys, err := fl.Keys()
	require.NoError(t, err)
	assert.Empty(t, keys, "a spare is no key")

	b, err := fl.Lock(context.Background(), "b")
	require.NoError(t, err)
	defer b.Unlock(true)
	now, err := os.Stat(filepath.Join(dir, "b"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(held, now), "b took a's file")
	assert.Zero(t, b.Stamp(), "and none of a's stamps")
	keys, err = fl.Keys()
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, keys)
}
