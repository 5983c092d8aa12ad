//go:build !linux

package fsutil

import (
	"errors"
	"os"
)

var errNoUnnamed = errors.New("no unnamed temporary files here")

// createUnnamedTemp: only Linux makes unnamed files (O_TMPFILE).
func (Root) createUnnamedTemp(string, string) (*os.File, error) { return nil, errNoUnnamed }
