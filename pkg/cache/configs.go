package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
)

// digestPrefix starts every config digest: the algorithm.
const digestPrefix = "sha256:"

// ConfigDigest returns the digest that names config bytes among the saved
// configs: "sha256:" and the hex SHA-256 of b.
func ConfigDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// ValidateDigest checks that d has the form [ConfigDigest] gives.
func ValidateDigest(d string) error {
	h, ok := strings.CutPrefix(d, digestPrefix)
	if ok && len(h) == sha256.Size*2 && !strings.ContainsFunc(h, func(r rune) bool {
		return (r < '0' || r > '9') && (r < 'a' || r > 'f')
	}) {
		return nil
	}
	return &InvalidNameError{Field: FieldConfigDigest, Value: d, Reason: "is not sha256:<64 lower-case hex digits>"}
}

// ConfigsDir returns the directory of the saved configs,
// <dir>/ocicni/configs.
func (c *Cache) ConfigsDir() string {
	return filepath.Join(c.Dir(), "ocicni", "configs")
}

func (c *Cache) configPath(digest string) (string, error) {
	if err := ValidateDigest(digest); err != nil {
		return "", err
	}
	return filepath.Join(c.ConfigsDir(), strings.TrimPrefix(digest, digestPrefix)), nil
}

// SaveConfig keeps a copy of config bytes b, content-addressed, and
// returns its digest. One copy is kept per distinct config. A new copy is
// written durably (temporary file, sync, rename, directory sync) before
// SaveConfig returns; an existing one gets its modification time set to
// now, which tells [Cache.ListConfigs]'s callers that it is in use.
func (c *Cache) SaveConfig(b []byte) (string, error) {
	digest := ConfigDigest(b)
	path, _ := c.configPath(digest) // a digest ConfigDigest made is valid
	now := time.Now()
	err := os.Chtimes(path, now, now)
	if err == nil {
		return digest, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cache: save config %s: %w", digest, err)
	}
	dir := c.ConfigsDir()
	if err := fsutil.MkdirAllDurable(dir, 0o700); err != nil {
		return "", fmt.Errorf("cache: save config: %w", err)
	}
	if err := fsutil.WriteDurable(dir, filepath.Base(path), tmpPrefix+"config-*", b); err != nil {
		return "", fmt.Errorf("cache: save config %s: %w", digest, err)
	}
	return digest, nil
}

// ReadConfig returns the saved config of digest. A file whose content
// does not match its digest (or that is not a regular file, or larger
// than [MaxFileSize]) gives an *[EntryError] matching [ErrCorruptEntry];
// a missing one an *EntryError matching fs.ErrNotExist.
func (c *Cache) ReadConfig(digest string) ([]byte, error) {
	path, err := c.configPath(digest)
	if err != nil {
		return nil, err
	}
	data, err := fsutil.ReadRegular(path, MaxFileSize, false)
	switch {
	case errors.Is(err, fsutil.ErrNotRegular) || errors.Is(err, fsutil.ErrTooLarge):
		return nil, &EntryError{Path: path, Err: corrupt(err)}
	case err != nil:
		return nil, &EntryError{Path: path, Err: err}
	case ConfigDigest(data) != digest:
		return nil, &EntryError{Path: path, Err: corruptf("content does not match its digest")}
	}
	return data, nil
}

// SavedConfig describes one saved config.
type SavedConfig struct {
	Digest  string
	ModTime time.Time // when it was last saved
}

// ListConfigs returns the saved configs, sorted by digest. A missing
// directory yields (nil, nil). Files that are not saved configs (an
// interrupted write's temporary file) are skipped.
func (c *Cache) ListConfigs() ([]SavedConfig, error) {
	des, err := os.ReadDir(c.ConfigsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache: list configs: %w", err)
	}
	var out []SavedConfig
	for _, de := range des {
		d := digestPrefix + de.Name()
		if !de.Type().IsRegular() || ValidateDigest(d) != nil {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed since the listing
		}
		out = append(out, SavedConfig{Digest: d, ModTime: fi.ModTime()})
	}
	return out, nil
}

// RemoveConfig deletes the saved config of digest. An absent one is not
// an error. The caller makes sure no record refers to it.
func (c *Cache) RemoveConfig(digest string) error {
	path, err := c.configPath(digest)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: path, Err: err}
	}
	return nil
}
