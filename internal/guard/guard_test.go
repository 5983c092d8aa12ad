package guard

import (
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDo(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		fn      func() error
		want    error // matched with errors.Is
		panics  bool
		message string
	}{
		{name: "no error", fn: func() error { return nil }},
		{name: "error passes through", fn: func() error { return boom }, want: boom},
		{
			name: "panic with a value", fn: func() error { panic("bad") }, want: ErrPanic, panics: true,
			message: "libcni DEL panicked reading /c/x: bad",
		},
		{
			name: "nil dereference", fn: func() error {
				var p *struct{ x int }
				return errors.New(string(rune(p.x)))
			}, want: ErrPanic, panics: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Do("libcni DEL", "/c/x", tc.fn)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var pe *PanicError
			assert.Equal(t, tc.panics, errors.As(err, &pe))
			if tc.panics {
				assert.Equal(t, "/c/x", pe.File)
				assert.NotEmpty(t, pe.Stack)
			}
			if tc.message != "" {
				assert.EqualError(t, err, tc.message)
			}
		})
	}
}

func TestDoReachesRuntimeError(t *testing.T) {
	err := Do("op", "", func() error {
		var v any = "not an int"
		_ = v.(int) // a failed type assertion panics with a runtime.Error
		return nil
	})
	var re runtime.Error
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, ErrPanic)
	assert.Contains(t, err.Error(), "op panicked: ")
}

func TestValue(t *testing.T) {
	v, err := Value("op", "", func() (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)

	v, err = Value("op", "f", func() (int, error) { panic("bad") })
	require.ErrorIs(t, err, ErrPanic)
	assert.Zero(t, v)
}
