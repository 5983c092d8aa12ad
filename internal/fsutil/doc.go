// Package fsutil reads files that other components write (CNI config
// files, libcni cache entries, order records) without trusting them: only
// regular files are opened, never in a way that can block (a FIFO swapped
// in between the check and the open is opened non-blocking and refused),
// and never more than a caller-given number of bytes is read.
//
// Failures are *fs.PathError values whose Err is [ErrNotRegular] or
// [ErrTooLarge], or the error from the os package, so errors.Is works on
// all of them.
package fsutil
