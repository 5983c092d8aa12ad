package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// ExpiringContext is a context whose deadline passes when the test calls
// [ExpiringContext.Expire], not at a time that a loaded machine can reach
// before the test is ready for it: its Err is then
// [context.DeadlineExceeded]. It reports no deadline time.
type ExpiringContext struct {
	done chan struct{}
	once sync.Once
}

var _ context.Context = (*ExpiringContext)(nil)

// NewExpiringContext returns a context whose deadline has not passed.
func NewExpiringContext() *ExpiringContext { return &ExpiringContext{done: make(chan struct{})} }

// Deadline reports no deadline time: only Expire ends the context.
func (c *ExpiringContext) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done is closed by Expire.
func (c *ExpiringContext) Done() <-chan struct{} { return c.done }

// Value holds nothing.
func (c *ExpiringContext) Value(any) any { return nil }

// Err is [context.DeadlineExceeded] once Expire was called, else nil.
func (c *ExpiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Expire makes the deadline pass. Calling it again does nothing.
func (c *ExpiringContext) Expire() { c.once.Do(func() { close(c.done) }) }

// DoneContext is a context that is already done, and the error it reports.
type DoneContext struct {
	Ctx  context.Context
	Want error
}

// DoneContexts returns, by name, a cancelled context and one whose
// deadline has passed: what a call that must start nothing is given.
func DoneContexts(tb testing.TB) map[string]DoneContext {
	tb.Helper()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	tb.Cleanup(cancel2)
	return map[string]DoneContext{
		"cancelled": {cancelled, context.Canceled},
		"expired":   {expired, context.DeadlineExceeded},
	}
}
