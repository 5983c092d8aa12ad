package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// KindOrderV1 is the "kind" of the attachment-order files this package
// writes.
const KindOrderV1 = "ocicniOrderV1"

// tmpPrefix starts the names of WriteOrder's temporary files. Container IDs
// cannot start with '.', so no order file is ever named like this.
const tmpPrefix = ".tmp-"

// Attachment is one (network, ifname) pair, in the order ADD attached them.
type Attachment struct {
	Network string `json:"network"`
	IfName  string `json:"ifName"`
	// NetNS is the sandbox's netns path at ADD, so that an attachment
	// that never reached libcni's cache can still be deleted inside it.
	NetNS string `json:"netns,omitempty"`
	// Config is the digest of the exact config the attachment was added
	// with, saved by [Cache.SaveConfig], so that it can be deleted when
	// neither its cache entry nor its config file is left. Records of
	// earlier versions have none.
	Config string `json:"config,omitempty"`
	// Heal is set while a failed DEL of the attachment waits to be
	// retried in the background.
	Heal *Heal `json:"heal,omitempty"`
}

// Heal is the retry state of an attachment whose DEL failed.
type Heal struct {
	// Attempts counts the failed DELs since the first failure.
	Attempts int `json:"attempts"`
	// Since is when the first DEL failed.
	Since time.Time `json:"since"`
	// Next is when the next retry is due.
	Next time.Time `json:"next"`
	// LastError is the last failure's message, for operators.
	LastError string `json:"lastError,omitempty"`
	// GaveUp is set once retries stopped: the attachment stays recorded
	// for GC.
	GaveUp bool `json:"gaveUp,omitempty"`
}

type orderFile struct {
	Kind        string       `json:"kind"`
	ContainerID string       `json:"containerId"`
	Attachments []Attachment `json:"attachments"`
}

// OrdersDir returns the directory of the attachment-order files,
// <dir>/ocicni/attachments.
func (c *Cache) OrdersDir() string {
	return filepath.Join(c.Dir(), "ocicni", "attachments")
}

func (c *Cache) orderPath(id string) (string, error) {
	if err := ValidateContainerID(id); err != nil {
		return "", err
	}
	if strings.HasPrefix(id, ".") {
		return "", &InvalidNameError{Field: FieldContainerID, Value: id, Reason: "starts with '.'"}
	}
	return filepath.Join(c.OrdersDir(), id), nil
}

// WriteOrder records the attachments of container id, in order, replacing
// any earlier record. The write is atomic and durable: a temporary file in
// the same directory is written, synced and renamed over
// <dir>/ocicni/attachments/<id>, and the directory is synced, so a reader
// sees the old record or the new one, and after WriteOrder returns the new
// one survives a power loss. The temporary file is a record that
// [Cache.RemoveOrder] retired when there is one (see spares), since
// creating a file can cost a pod's setup more than all the rest of the
// manager's work. Files are created 0600 and directories 0700. id and
// every name are checked with [ValidateNames], every NetNS with
// [ValidateNetNSPath], and every Config with [ValidateDigest].
//
// A failure leaves the old record in place and no temporary file, except
// one that matches [ErrNotDurable]: the new record is then in place. A
// spare that cannot take the new content is removed.
func (c *Cache) WriteOrder(id string, atts []Attachment) (err error) {
	if err := c.checkState(ordersRel); err != nil {
		return err
	}
	path, err := c.orderPath(id)
	if err != nil {
		return err
	}
	for _, a := range atts {
		if err := a.validate(id); err != nil {
			return err
		}
	}
	if atts == nil {
		atts = []Attachment{}
	}
	data, err := json.Marshal(orderFile{Kind: KindOrderV1, ContainerID: id, Attachments: atts})
	if err != nil {
		return fmt.Errorf("cache: write order %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if spare := c.spares.Take(dir); spare != "" && c.reuse(spare, path, data) {
		if err := c.root().SyncDir(dir); err != nil {
			return fmt.Errorf("cache: write order %s: %w: %w", path, ErrNotDurable, err)
		}
		return nil
	}
	if err := c.root().MkdirAllDurable(dir, 0o700); err != nil {
		return fmt.Errorf("cache: write order %s: making its directory: %w", path, err)
	}
	err = c.root().WriteDurable(dir, filepath.Base(path), tmpPrefix+id, data)
	switch {
	case errors.Is(err, fsutil.ErrNotDurable):
		return fmt.Errorf("cache: write order %s: %w: %w", path, ErrNotDurable, err)
	case err != nil:
		return fmt.Errorf("cache: write order %s: writing its temporary file: %w", path, err)
	}
	return nil
}

// ReadOrder returns the attachments recorded for container id. It returns
// (nil, nil) when there is no record, and a non-nil (possibly empty) slice
// otherwise. A corrupt record gives an *[EntryError] matching
// [ErrCorruptEntry].
func (c *Cache) ReadOrder(id string) ([]Attachment, error) {
	path, err := c.orderPath(id)
	if err != nil {
		return nil, err
	}
	data, err := fsutil.ReadRegular(path, MaxFileSize, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, fsutil.ErrNotRegular) || errors.Is(err, fsutil.ErrTooLarge):
		return nil, &EntryError{Path: path, ContainerID: id, Err: corrupt(err)}
	case err != nil:
		return nil, &EntryError{Path: path, ContainerID: id, Err: err}
	}
	atts, err := parseOrder(id, data)
	if err != nil {
		return nil, &EntryError{Path: path, ContainerID: id, Err: err}
	}
	return atts, nil
}

func parseOrder(id string, data []byte) ([]Attachment, error) {
	if len(data) == 0 {
		return nil, corruptf("empty file")
	}
	var f orderFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, corrupt(err)
	}
	switch {
	case f.Kind != KindOrderV1:
		return nil, corruptf("kind is %q, want %q", f.Kind, KindOrderV1)
	case f.ContainerID != id:
		return nil, corruptf("containerId is %q, want %q", f.ContainerID, id)
	case f.Attachments == nil:
		return nil, corruptf("missing attachments")
	}
	for i, a := range f.Attachments {
		if err := a.validate(id); err != nil {
			return nil, corruptf("attachment %d: %w", i, err)
		}
	}
	return f.Attachments, nil
}

// validate checks an attachment of container id before it is written, and
// after it is read: a record is acted on by name, so it passes the same
// checks as a request.
func (a Attachment) validate(id string) error {
	if err := ValidateNames(a.Network, id, a.IfName); err != nil {
		return err
	}
	if a.NetNS != "" {
		if err := ValidateNetNSPath(a.NetNS); err != nil {
			return err
		}
	}
	if a.Config != "" {
		return ValidateDigest(a.Config)
	}
	return nil
}

// MaxNetNSPathLen bounds a netns path (PATH_MAX on Linux).
const MaxNetNSPathLen = 4096

// ValidateNetNSPath checks that a netns path is absolute, clean, at most
// [MaxNetNSPathLen] bytes and free of control characters. It says nothing
// about what the path names; callers that run plugins in it check that.
func ValidateNetNSPath(path string) error {
	reason := ""
	switch {
	case !filepath.IsAbs(path):
		reason = "is not an absolute path"
	case len(path) > MaxNetNSPathLen:
		reason = fmt.Sprintf("is %d bytes long, more than %d", len(path), MaxNetNSPathLen)
	case filepath.Clean(path) != path:
		reason = "is not a clean path"
	case strings.ContainsFunc(path, unicode.IsControl):
		reason = "contains a control character"
	default:
		return nil
	}
	return &InvalidNameError{Field: FieldNetNS, Value: path, Reason: reason}
}

// RemoveOrder deletes the record of container id, and the temporary file
// that an interrupted [Cache.WriteOrder] of id may have left; a Cache made
// by [New] keeps up to 32 records under hidden names for WriteOrder to
// reuse. An absent record is not an error.
func (c *Cache) RemoveOrder(id string) error {
	if err := c.checkState(ordersRel); err != nil {
		return err
	}
	path, err := c.orderPath(id)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), tmpPrefix+id)
	if err := c.root().Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: tmp, ContainerID: id, Err: err}
	}
	retired, err := c.spares.Retire(path)
	switch {
	case retired, errors.Is(err, fs.ErrNotExist):
		return nil
	}
	if err := c.root().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: path, ContainerID: id, Err: err}
	}
	return nil
}

// HasOrder reports whether container id has an order record. It reads
// nothing of the record: an unreadable one counts.
func (c *Cache) HasOrder(id string) (bool, error) {
	path, err := c.orderPath(id)
	if err != nil {
		return false, err
	}
	_, err = c.root().Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, &EntryError{Path: path, ContainerID: id, Err: err}
}

// ListOrders returns, sorted, the container IDs that have an order record.
// A missing directory yields (nil, nil). Temporary files of an interrupted
// [Cache.WriteOrder], and retired records kept for reuse, are skipped.
func (c *Cache) ListOrders() ([]string, error) {
	des, err := readDirIfExists(c.OrdersDir())
	if err != nil {
		return nil, fmt.Errorf("cache: list orders: %w", err)
	}
	var ids []string
	for _, de := range des {
		if id, ok := orderIDOf(de); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// orderIDOf returns the container ID of de, a file of [Cache.OrdersDir],
// when it is an order record: not a directory, and not a temporary file,
// a retired record or a link to a saved config (their names start with
// a dot, which no container ID does).
func orderIDOf(de os.DirEntry) (string, bool) {
	if de.IsDir() || strings.HasPrefix(de.Name(), ".") {
		return "", false
	}
	return de.Name(), true
}

// reuse writes data into the spare file at spare, replacing its content,
// syncs it and renames it to path (the caller syncs the directory). It
// reports false, having removed what it could, when any step fails; the
// caller then creates a file instead.
func (c *Cache) reuse(spare, path string, data []byte) bool {
	f, err := c.root().OpenFile(spare, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	// WriteAt then Truncate, not O_TRUNC: ext4 flushes a file that was
	// truncated to zero and rewritten when it is closed.
	_, werr := f.WriteAt(data, 0)
	terr := f.Truncate(int64(len(data)))
	serr := f.Sync()
	cerr := f.Close()
	if werr != nil || terr != nil || serr != nil || cerr != nil || c.root().Rename(spare, path) != nil {
		_ = c.root().Remove(spare)
		return false
	}
	return true
}
