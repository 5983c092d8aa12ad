//go:build unix && !linux

package pluginexec

import (
	"errors"
	"os"
)

// memFile is Linux's: elsewhere newCapture uses an unlinked temporary file.
func memFile(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// limitCapture is Linux's, for a file that memFile returns.
func limitCapture(*os.File, int64) error { return errors.ErrUnsupported }
