package locks

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// The lock files' own cost, one pod operation's worth at a time, for
// BENCHMARKS.md ("Locks across engines"): the node gate taken shared and
// released, as every pod operation does; a new key's file locked and
// retired (a setup, then its teardown), with the spares and without; an
// existing key's locked and stamped (a status, a retry). They run in a
// temporary dir, on the file system of $TMPDIR, below it as a manager's
// are below its cache dir: each reached without following a symlink.
func BenchmarkLockFiles(b *testing.B) {
	ctx := context.Background()
	newFiles := func(b *testing.B) *Files {
		b.Helper()
		root := b.TempDir()
		return NewFiles(filepath.Join(root, "ocicni", "locks"), fsutil.NewRoot(root))
	}
	b.Run("node-gate-shared", func(b *testing.B) {
		fl := newFiles(b)
		for b.Loop() {
			l, err := fl.RLockNode(ctx)
			if err != nil {
				b.Fatal(err)
			}
			l.Unlock(false)
		}
	})
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("new-key-then-removed/spares=%v", reuse), func(b *testing.B) {
			fl := newFiles(b)
			if !reuse {
				fl.spares = nil
			}
			for i := 0; b.Loop(); i++ {
				l, err := fl.Lock(ctx, fmt.Sprintf("sandbox-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				l.Unlock(true)
			}
		})
	}
	b.Run("existing-key-stamped", func(b *testing.B) {
		fl := newFiles(b)
		for b.Loop() {
			l, err := fl.Lock(ctx, "sandbox")
			if err != nil {
				b.Fatal(err)
			}
			l.Unlock(false)
		}
	})
}
