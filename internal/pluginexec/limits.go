package pluginexec

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Caps on what is kept of one plugin run's output. A plugin that prints
// more is killed with its process group, and its run fails with an
// *[OutputLimitError]. MaxStdout is far above any real result, which
// lists interfaces, addresses, routes and DNS; stderr is only
// informational.
const (
	MaxStdout = 16 << 20
	MaxStderr = 4 << 20
)

// QuoteLimit is the most characters of a plugin's output that an error
// quotes; past it the quote ends with a marker saying how many bytes were
// left out. The whole output, up to the caps, reaches a caller that asks
// for it through [WithOutput].
const QuoteLimit = 4 << 10

// ErrOutputLimit is matched by every *[OutputLimitError].
var ErrOutputLimit = errors.New("plugin output exceeds its limit")

// OutputLimitError is the failure of a plugin run that printed more than
// the cap of one of its streams: the plugin and its process group were
// killed. Head is the start of what it printed there, at most
// [QuoteLimit] bytes.
type OutputLimitError struct {
	Plugin string // the binary's path
	Stream string // "stdout" or "stderr"
	Limit  int64  // the stream's cap in bytes
	Head   []byte
}

func (e *OutputLimitError) Error() string {
	return fmt.Sprintf("plugin %s printed more than %d bytes to %s, and was killed; it began %s",
		e.Plugin, e.Limit, e.Stream, Quote(e.Head, QuoteLimit/4))
}

// Is reports whether target is [ErrOutputLimit].
func (e *OutputLimitError) Is(target error) bool { return target == ErrOutputLimit }

// Quote returns b as a double-quoted Go string literal, as %q would, with
// at most max bytes between the quotes: a longer b is cut at a character,
// and the quote is followed by a marker with the number of bytes of b
// left out.
func Quote(b []byte, max int) string {
	q := make([]byte, 0, min(len(b), max)+48)
	q = append(q, '"')
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		var esc []byte
		if r == utf8.RuneError && n == 1 {
			esc = []byte(`\x` + strconv.FormatUint(uint64(b[i])|0x100, 16)[1:])
		} else {
			switch r {
			case '"':
				esc = []byte(`\"`)
			case '\'':
				esc = []byte{'\''}
			default:
				esc = strconv.AppendQuoteRune(nil, r)
				esc = esc[1 : len(esc)-1]
			}
		}
		if len(q)+len(esc) > max+1 {
			break
		}
		q = append(q, esc...)
		i += n
	}
	q = append(q, '"')
	if i < len(b) {
		q = fmt.Appendf(q, "... (%d more bytes)", len(b)-i)
	}
	return string(q)
}

// Output receives the whole output of a plugin run, up to the caps (only
// the [OutputLimitError]'s Head of a stream that overflowed).
type Output struct {
	Stdout, Stderr []byte
}

type outputKey struct{}

// WithOutput returns ctx asking the executor of [NewRaw] to store what
// the plugin run under it printed in out. Other executors leave out
// empty.
func WithOutput(ctx context.Context, out *Output) context.Context {
	return context.WithValue(ctx, outputKey{}, out)
}

func outputOf(ctx context.Context) *Output {
	out, _ := ctx.Value(outputKey{}).(*Output)
	return out
}
