package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pid file that a shell has created but not written yet reads as not
// written, not as a bad pid file: under load, a reader can come between
// the shell's open and its write.
func TestReadPidFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content *string // nil: no file
		want    int
		wantErr bool
	}{
		{name: "missing"},
		{name: "created, not written", content: ptr("")},
		{name: "echo $$", content: ptr("1234\n"), want: 1234},
		{name: "no newline", content: ptr("1234"), want: 1234},
		{name: "garbage", content: ptr("12ab\n"), wantErr: true},
		{name: "zero", content: ptr("0\n"), wantErr: true},
		{name: "negative", content: ptr("-1\n"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "pid")
			if tt.content != nil {
				require.NoError(t, os.WriteFile(path, []byte(*tt.content), 0o644))
			}
			pid, err := readPidFile(path)
			if tt.wantErr {
				require.ErrorIs(t, err, errBadPidFile)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, pid)
		})
	}
}

func ptr(s string) *string { return &s }
