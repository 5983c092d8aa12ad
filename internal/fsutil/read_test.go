package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	require.NoError(t, os.WriteFile(regular, []byte("0123456789"), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	toRegular := filepath.Join(dir, "to-regular")
	require.NoError(t, os.Symlink(regular, toRegular))
	toZero := filepath.Join(dir, "to-zero")
	require.NoError(t, os.Symlink("/dev/zero", toZero))
	toFifo := filepath.Join(dir, "to-fifo")
	require.NoError(t, os.Symlink(fifo, toFifo))

	tests := []struct {
		name    string
		path    string
		limit   int64
		follow  bool
		want    string
		wantErr error
	}{
		{name: "regular", path: regular, limit: 10, want: "0123456789"},
		{name: "regular over the limit", path: regular, limit: 9, wantErr: ErrTooLarge},
		{name: "fifo", path: fifo, limit: 10, wantErr: ErrNotRegular},
		{name: "fifo through a followed symlink", path: toFifo, limit: 10, follow: true, wantErr: ErrNotRegular},
		{name: "directory", path: dir, limit: 10, follow: true, wantErr: ErrNotRegular},
		{name: "symlink not followed", path: toRegular, limit: 10, wantErr: ErrNotRegular},
		{name: "symlink followed", path: toRegular, limit: 10, follow: true, want: "0123456789"},
		{name: "symlink to /dev/zero", path: toZero, limit: 10, follow: true, wantErr: ErrNotRegular},
		{name: "missing", path: filepath.Join(dir, "missing"), limit: 10, wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRegular(tt.path, tt.limit, tt.follow)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.path, pe.Path)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}
