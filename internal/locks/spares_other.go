//go:build !linux

package locks

import "errors"

// reuseFiles: without renameat2(2), a spare cannot be put in place
// without the risk of replacing a file made meanwhile, so lock files are
// created and removed.
const reuseFiles = false

func renameNoReplace(string, string) error { return errors.ErrUnsupported }
