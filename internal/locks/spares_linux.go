package locks

import "golang.org/x/sys/unix"

// reuseFiles says whether a key's lock file is taken from the spares
// (see [Files.openKey]): renameat2(2) can put a spare in place without
// replacing a file made meanwhile.
const reuseFiles = true

// renameNoReplace renames old to new, failing with EEXIST when new
// exists.
func renameNoReplace(old, new string) error {
	return unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
}
