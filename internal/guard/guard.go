package guard

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrPanic is matched by every [*PanicError].
var ErrPanic = errors.New("a library call panicked")

// PanicError is a panic recovered at the boundary of a call into a
// dependency.
type PanicError struct {
	// Op names the call, such as "libcni DEL".
	Op string
	// File is the file the call was reading when that is known, typically
	// a libcni cache entry; "" otherwise.
	File string
	// Value is what the dependency panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s panicked reading %s: %v", e.Op, e.File, e.Value)
	}
	return fmt.Sprintf("%s panicked: %v", e.Op, e.Value)
}

// Is reports whether target is [ErrPanic].
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic's value when it is an error (a runtime error,
// for instance), so that errors.As reaches it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Do calls fn and returns its error, or a *[PanicError] for op and file
// when fn panics.
func Do(op, file string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Op: op, File: file, Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Value is [Do] for a call that returns a value; on a panic the value is
// T's zero value.
func Value[T any](op, file string, fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, &PanicError{Op: op, File: file, Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}
