package locks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// A key's lock that its holder left to an heir (a plugin's daemon that
// inherited the file) is taken over once the holder is gone and the
// bound has passed, and never while the holder lives. Two waiters take
// it over once, and then exclude each other as usual.
func TestTakeoverOfAnAbandonedLock(t *testing.T) {
	t.Parallel()
	const after = 50 * time.Millisecond
	for _, tc := range []struct {
		name    string
		gone    bool // the holder's process has ended
		waiters int
		want    int // takeovers
	}{
		{name: "holder alive", gone: false, waiters: 1, want: 0},
		{name: "holder gone", gone: true, waiters: 1, want: 1},
		{name: "holder gone, two waiters", gone: true, waiters: 2, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var takeovers atomic.Int32
			newFiles := func() *Files {
				fl := NewFiles(dir, fsutil.Root{})
				fl.SetTakeover(Takeover{
					After: func() time.Duration { return after },
					Log:   func(string, Stamp) { takeovers.Add(1) },
				})
				return fl
			}
			holder := newFiles()
			l, err := holder.Lock(context.Background(), "sb")
			require.NoError(t, err)
			assert.Equal(t, holder.Owner(), l.Holder().Owner, "the holder stamped the file")
			_ = l // never unlocked: an heir keeps the open file
			if tc.gone {
				// As a holder in a process that has ended stamped it: no
				// process has a pid above the kernel's pid_max (at most 2^22).
				writeStampAt(l.f, holderAt, "2147483646-gone", time.Now())
			}

			ctx, cancel := context.WithTimeout(context.Background(), 20*after)
			defer cancel()
			var inside atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, tc.waiters)
			for range tc.waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fl := newFiles()
					got, err := fl.Lock(ctx, "sb")
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						errs <- errors.New("two holders at once")
					}
					time.Sleep(after / 5) // a holder's work, so that the waiters overlap
					inside.Add(-1)
					got.Unlock(false)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if tc.gone {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, context.DeadlineExceeded, "a live holder is waited for")
				}
			}
			assert.Equal(t, int32(tc.want), takeovers.Load())
		})
	}
}
