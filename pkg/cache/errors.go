package cache

import (
	"errors"
	"fmt"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/internal/names"
)

var (
	// ErrCorruptEntry marks a file that cannot be a valid cache entry: it is
	// empty, truncated, not JSON, of another kind, or misses a required field.
	// Match it with errors.Is; the *[EntryError] carries the file's details.
	ErrCorruptEntry = errors.New("cache: corrupt entry")

	// ErrInvalidName marks a network name, container ID or interface name
	// that cannot safely become part of a file path. See [ValidateName].
	// It is the config loader's too, which applies the same rules.
	ErrInvalidName = names.ErrInvalidName

	// ErrOutsideResults is returned by [Cache.RemoveFile] for a path that is
	// not a file directly inside [Cache.ResultsDir].
	ErrOutsideResults = errors.New("cache: path is not inside the results directory")

	// ErrSymlinkedState marks a directory below the cache dir where the
	// cache writes that is a symlink: see
	// [Cache.CheckState].
	ErrSymlinkedState = fsutil.ErrSymlinked

	// ErrNotDurable marks a [Cache.WriteOrder] that failed after the new
	// record took its place: only the directory sync that makes it
	// durable failed. The record on disk is then the new one, so a caller
	// that takes the write back writes the old record again (or removes
	// the record, when there was none).
	ErrNotDurable = errors.New("cache: record in place, but not durable")
)

// EntryError reports a cache file that could not be read or parsed. Network,
// ContainerID and IfName hold whatever could be learned from the file name
// and the file content; any of them may be empty.
//
// Err is the cause. For a corrupt file errors.Is(err, [ErrCorruptEntry])
// holds; for a read failure Err is the error from the os package, so
// errors.Is(err, fs.ErrNotExist) and similar checks work.
type EntryError struct {
	Path        string
	Network     string
	ContainerID string
	IfName      string
	Err         error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("cache entry %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// InvalidNameError reports why a name was rejected by [ValidateName].
// It unwraps to [ErrInvalidName]. Its Field is "network", "container ID",
// "ifname", "netns path" or "config digest" (see [FieldNetwork] and the
// constants after it).
type InvalidNameError = names.InvalidNameError
