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

// configLinkPrefix starts the names of the links from a record to its
// saved configs, in [Cache.OrdersDir]: ".cfg.<containerID>.<hex digest>".
// Container IDs cannot start with '.', so no record is named so.
const configLinkPrefix = ".cfg."

func (c *Cache) configPath(digest string) (string, error) {
	if err := ValidateDigest(digest); err != nil {
		return "", err
	}
	return filepath.Join(c.ConfigsDir(), strings.TrimPrefix(digest, digestPrefix)), nil
}

func (c *Cache) configLink(id, digest string) (string, error) {
	if err := ValidateDigest(digest); err != nil {
		return "", err
	}
	if _, err := c.orderPath(id); err != nil {
		return "", err
	}
	return filepath.Join(c.OrdersDir(), configLinkPrefix+id+"."+strings.TrimPrefix(digest, digestPrefix)), nil
}

// SaveConfig keeps config bytes b for the order record of container id
// and returns its digest (see [ConfigDigest]), which the record's
// [Attachment.Config] then names. One copy of each distinct config is
// kept in [Cache.ConfigsDir], written durably the first time; each record
// that uses it holds a hard link to it next to the record, which the next
// [Cache.WriteOrder] of id makes durable. So a record's configs go with
// the record ([Cache.ReleaseConfigs]), whatever happens to other records,
// and a config is stored once however many records use it. A failure
// leaves no file of its own behind (see [Cache.SaveConfigUndoable]).
func (c *Cache) SaveConfig(id string, b []byte) (string, error) {
	s, err := c.SaveConfigUndoable(id, b)
	return s.Digest, err
}

// SaveConfigUndoable is [Cache.SaveConfig] for a caller that may have to
// take the save back, when the record that was to name the config cannot
// be written. A failure removes what the call made before it returns,
// and nothing that was there before it (the link of an earlier record of
// id, a copy other records link); the directories of the layout, once
// made, stay.
func (c *Cache) SaveConfigUndoable(id string, b []byte) (ConfigSave, error) {
	if err := c.checkState(configsRel, ordersRel); err != nil {
		return ConfigSave{}, err
	}
	digest := ConfigDigest(b)
	link, err := c.configLink(id, digest)
	if err != nil {
		return ConfigSave{}, err
	}
	s := ConfigSave{Digest: digest, id: id}
	path, _ := c.configPath(digest) // a digest ConfigDigest made is valid
	c.warm.touch(digest)
	// Linking first costs one system call when the copy exists, as it
	// does for every pod but the first of a config.
	err = c.root().Link(path, link)
	switch {
	case err == nil:
		s.newLink = true
		return s, nil
	case errors.Is(err, fs.ErrExist):
		return s, nil
	case !errors.Is(err, fs.ErrNotExist):
		return ConfigSave{}, fmt.Errorf("cache: save config %s: linking the shared copy: %w", digest, err)
	}
	// The link's directory may be what was missing: a copy kept without
	// links is then replaced, and is not this call's.
	_, serr := c.root().Lstat(path)
	s.newCopy = errors.Is(serr, fs.ErrNotExist)
	s.newLink, err = c.writeConfigLinked(path, link, b)
	if err != nil {
		// Only a failed directory sync leaves the copy and the link in
		// place; fsutil removes the rest itself.
		if errors.Is(err, fsutil.ErrNotDurable) {
			err = errors.Join(err, c.UndoSaveConfig(s))
		}
		return ConfigSave{}, fmt.Errorf("cache: save config %s: writing the shared copy: %w", digest, err)
	}
	return s, nil
}

// writeConfigLinked writes a new shared copy of a config durably, links
// the record's link to it, and only then publishes it at path; it reports
// whether it made the link (see [fsutil.WriteDurableLinked]). Another
// Cache (or GC) may remove the copy at path at any time once no record
// links it; linking the new file before it has that name leaves nothing
// to remove in between.
func (c *Cache) writeConfigLinked(path, link string, b []byte) (bool, error) {
	for _, dir := range []string{filepath.Dir(path), filepath.Dir(link)} {
		if err := c.root().MkdirAllDurable(dir, 0o700); err != nil {
			return false, err
		}
	}
	return c.root().WriteDurableLinked(filepath.Dir(path), filepath.Base(path), tmpPrefix+"config-*", b, link)
}

// ReadConfig returns the config of digest saved for the record of
// container id: its link next to the record, else the shared copy. A file
// whose content does not match its digest (or that is not a regular file,
// or larger than [MaxFileSize]) gives an *[EntryError] matching
// [ErrCorruptEntry]; a missing one an *EntryError matching fs.ErrNotExist.
func (c *Cache) ReadConfig(id, digest string) ([]byte, error) {
	link, err := c.configLink(id, digest)
	if err != nil {
		return nil, err
	}
	data, err := readConfigFile(link, digest)
	if errors.Is(err, fs.ErrNotExist) {
		path, _ := c.configPath(digest)
		data, err = readConfigFile(path, digest)
	}
	return data, err
}

func readConfigFile(path, digest string) ([]byte, error) {
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

// ReleaseConfigs removes the links of container id's record to the saved
// configs of digests (those it no longer uses, or all of them when the
// record goes), and each shared copy that no record links any more, except
// the copies of the 16 configs this Cache saved last, which it keeps for
// the next setup to link (see [Cache.ListConfigs] for their removal).
// Empty digests are skipped. It returns the first failure and goes on
// past it.
func (c *Cache) ReleaseConfigs(id string, digests ...string) error {
	if err := c.checkState(configsRel, ordersRel); err != nil {
		return err
	}
	var errs []error
	for _, d := range digests {
		if d == "" {
			continue
		}
		link, err := c.configLink(id, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.root().Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if c.warm.has(d) {
			continue
		}
		if err := c.removeUnlinkedCopy(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SavedConfig describes one shared copy of a saved config, or one link
// from a record to it.
type SavedConfig struct {
	Digest string
	// ContainerID is the record's container, for a link; "" for a shared
	// copy.
	ContainerID string
	Path        string
	// Links is the number of hard links to a shared copy, itself
	// included; 0 for a link, and where the platform does not tell.
	Links uint64
	// Changed is when a shared copy's inode last changed (a new link
	// changes it); zero for a link.
	Changed time.Time
}

// ListConfigs returns the shared copies of the saved configs and the
// records' links to them, for a garbage collector that looks for copies
// that no record links and links whose record is gone. Only the shared
// copies are stat'ed (there is a link per record). A missing directory
// yields nothing. Temporary files are skipped.
func (c *Cache) ListConfigs() ([]SavedConfig, error) {
	_, saved, err := c.ListOrdersAndConfigs()
	return saved, err
}

// ListOrdersAndConfigs returns what [Cache.ListOrders] and
// [Cache.ListConfigs] return, listing the directory of the order records,
// which also holds their links to the saved configs, once instead of
// twice: a node holds a record and a link per sandbox.
func (c *Cache) ListOrdersAndConfigs() (ids []string, saved []SavedConfig, err error) {
	copies, err := readDirIfExists(c.ConfigsDir())
	if err != nil {
		return nil, nil, fmt.Errorf("cache: list configs: %w", err)
	}
	orders, err := readDirIfExists(c.OrdersDir())
	if err != nil {
		return nil, nil, fmt.Errorf("cache: list orders: %w", err)
	}
	for _, de := range copies {
		if sc, ok := sharedCopyOf(c.ConfigsDir(), de); ok {
			saved = append(saved, sc)
		}
	}
	for _, de := range orders {
		if id, ok := orderIDOf(de); ok {
			ids = append(ids, id)
			continue
		}
		if sc, ok := savedConfigOf(true, de.Name()); ok && de.Type().IsRegular() {
			sc.Path = filepath.Join(c.OrdersDir(), de.Name())
			saved = append(saved, sc)
		}
	}
	return ids, saved, nil
}

// readDirIfExists is os.ReadDir, sorted by name, with nothing for a
// missing directory.
func readDirIfExists(dir string) ([]os.DirEntry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return des, err
}

// sharedCopyOf describes the shared copy de of ConfigsDir dir, stat'ed
// for its links and change time; false for any other file, or one
// removed since the listing.
func sharedCopyOf(dir string, de os.DirEntry) (SavedConfig, bool) {
	sc, ok := savedConfigOf(false, de.Name())
	if !ok || !de.Type().IsRegular() {
		return sc, false
	}
	sc.Path = filepath.Join(dir, de.Name())
	fi, err := de.Info()
	if err != nil {
		return sc, false // removed since the listing
	}
	sc.Links, sc.Changed, _ = fsutil.Links(fi)
	if sc.Changed.IsZero() {
		sc.Changed = fi.ModTime()
	}
	return sc, true
}

// savedConfigOf parses a file name of ConfigsDir (a hex digest) or of
// OrdersDir (a link, see configLinkPrefix).
func savedConfigOf(link bool, name string) (SavedConfig, bool) {
	var sc SavedConfig
	hex := name
	if link {
		rest, ok := strings.CutPrefix(name, configLinkPrefix)
		i := strings.LastIndexByte(rest, '.')
		if !ok || i < 0 {
			return sc, false
		}
		sc.ContainerID, hex = rest[:i], rest[i+1:]
		if ValidateContainerID(sc.ContainerID) != nil {
			return sc, false
		}
	}
	sc.Digest = digestPrefix + hex
	return sc, ValidateDigest(sc.Digest) == nil
}

// RemoveSavedConfig removes a file that [Cache.ListConfigs] listed. It
// refuses any other path. An absent file is not an error.
func (c *Cache) RemoveSavedConfig(sc SavedConfig) error {
	if err := c.checkState(configsRel, ordersRel); err != nil {
		return err
	}
	want, err := c.configPath(sc.Digest)
	if sc.ContainerID != "" {
		want, err = c.configLink(sc.ContainerID, sc.Digest)
	}
	if err != nil {
		return err
	}
	if filepath.Clean(sc.Path) != want {
		return fmt.Errorf("cache: %s is not the saved config file it names", sc.Path)
	}
	if err := c.root().Remove(want); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &EntryError{Path: want, Err: err}
	}
	return nil
}

// IsConfigLink reports whether name, a file name in [Cache.OrdersDir], is
// a record's link to a saved config (see [Cache.SaveConfig]), not a
// record.
func IsConfigLink(name string) bool { return strings.HasPrefix(name, configLinkPrefix) }

// RemoveStrays removes what a crash may have left of container id's
// record when the record itself is gone or was never written: its links
// to saved configs (releasing each shared copy no record links any more,
// as [Cache.ReleaseConfigs] does) and the temporary files of an
// interrupted [Cache.WriteOrder]. The caller makes sure no record of id
// exists and none is being written. It lists [Cache.OrdersDir], so it is
// for the rare paths: a teardown or GC that found no record.
func (c *Cache) RemoveStrays(id string) error {
	if err := c.checkState(configsRel, ordersRel); err != nil {
		return err
	}
	if _, err := c.orderPath(id); err != nil {
		return err
	}
	des, err := os.ReadDir(c.OrdersDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: remove strays of %s: %w", id, err)
	}
	var digests []string
	var errs []error
	for _, de := range des {
		name := de.Name()
		switch {
		case IsConfigLink(name):
			if sc, ok := savedConfigOf(true, name); ok && sc.ContainerID == id {
				digests = append(digests, sc.Digest)
			}
		case name == tmpPrefix+id:
			if err := c.root().Remove(filepath.Join(c.OrdersDir(), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(append(errs, c.ReleaseConfigs(id, digests...))...)
}

// What follows takes back saved configs: what [Cache.SaveConfigUndoable]
// made, for a caller whose record could not be written.

// ConfigSave is what one [Cache.SaveConfigUndoable] call made, so that
// [Cache.UndoSaveConfig] removes exactly that: the record's link when it
// was new, and the shared copy when the call wrote it.
type ConfigSave struct {
	// Digest names the config saved.
	Digest           string
	id               string
	newLink, newCopy bool
}

// UndoSaveConfig removes what the save s made: the record's link, if the
// save made it, and the shared copy, if the save wrote it and no record
// links it since. It is for a caller whose record could not be written,
// before any other write of the same record. An absent file is not an
// error.
func (c *Cache) UndoSaveConfig(s ConfigSave) error {
	if err := c.checkState(configsRel, ordersRel); err != nil {
		return err
	}
	var errs []error
	if s.newLink {
		link, err := c.configLink(s.id, s.Digest)
		if err == nil {
			err = c.root().Remove(link)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cache: undo saving config %s: %w", s.Digest, err))
		}
	}
	if s.newCopy {
		if err := c.removeUnlinkedCopy(s.Digest); err != nil {
			errs = append(errs, fmt.Errorf("cache: undo saving config %s: %w", s.Digest, err))
		}
	}
	return errors.Join(errs...)
}

// removeUnlinkedCopy removes the shared copy of digest when no record
// links it.
func (c *Cache) removeUnlinkedCopy(digest string) error {
	path, err := c.configPath(digest)
	if err != nil {
		return err
	}
	fi, err := c.root().Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if n, _, ok := fsutil.Links(fi); ok && n == 1 {
		// A record that links it meanwhile keeps its own link.
		if err := c.root().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
