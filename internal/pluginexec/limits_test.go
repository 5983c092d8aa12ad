package pluginexec

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestQuote: within its bound, Quote is strconv.Quote; past it, the quote
// is cut at a character, stays within the bound, and says how much it
// left out.
func TestQuote(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"empty", "", 16, `""`},
		{"fits", "boom\n", 16, `"boom\n"`},
		{"quotes and backslashes", `say "hi" it's \ here`, 64, strconv.Quote(`say "hi" it's \ here`)},
		{"invalid utf-8", "a\xffb\x00", 64, strconv.Quote("a\xffb\x00")},
		{"multibyte", "héllo ✓", 64, strconv.Quote("héllo ✓")},
		{"at the bound", "01234567", 8, `"01234567"`},
		{"cut", "0123456789abcdef", 8, `"01234567"... (8 more bytes)`},
		{"cut before an escape", "0123456\n89", 8, `"0123456"... (3 more bytes)`},
		{"cut before a multibyte character", "012345✓", 8, `"012345"... (3 more bytes)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Quote([]byte(tc.in), tc.max))
		})
	}
}

func FuzzQuote(f *testing.F) {
	f.Add([]byte("boom\n"), 16)
	f.Add([]byte("\xff\xfe\"'\\✓"), 3)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		max = max%(2*len(b)+8) + 2
		if max < 2 {
			max += 2 * (len(b) + 8)
		}
		got := Quote(b, max)
		quoted, rest, cutOff := strings.Cut(got, `"... (`)
		if !cutOff {
			if want := strconv.Quote(string(b)); got != want {
				t.Fatalf("Quote(%q, %d) = %s, want %s", b, max, got, want)
			}
			return
		}
		if len(quoted)-1 > max {
			t.Fatalf("Quote(%q, %d) = %s: longer than its bound", b, max, got)
		}
		if _, err := strconv.Unquote(quoted + `"`); err != nil {
			t.Fatalf("Quote(%q, %d) = %s: not a quoted string: %v", b, max, got, err)
		}
		if !strings.HasSuffix(rest, " more bytes)") {
			t.Fatalf("Quote(%q, %d) = %s: no marker", b, max, got)
		}
	})
}

// TestCut: cut keeps a string within its bound, at a character.
func TestCut(t *testing.T) {
	assert.Equal(t, "short", cut("short", 8))
	assert.Equal(t, "0123... (4 more bytes)", cut("01234567", 4))
	assert.Equal(t, "012... (4 more bytes)", cut("012✓4", 4))
}
