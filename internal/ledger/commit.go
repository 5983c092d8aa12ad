package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/seed-671fdd43/ocicni/internal/fsutil"
	"github.com/seed-671fdd43/ocicni/pkg/cache"
)

// Change is one change to a sandbox's part of the store, which
// [Ledger.Commit] makes whole or not at all.
type Change struct {
	// Old is the sandbox's record as the caller read it under the
	// sandbox's lock (nil for none, or an unreadable one), and Next the
	// record to write in its place; an empty Next removes it. With Keep
	// the record stays as it is, and Next is ignored.
	Old, Next []cache.Attachment
	Keep      bool
	// Drop names the cache entries to remove: their attachments are gone.
	Drop []Entry
	// Strays asks to remove what a setup killed before it wrote its
	// record left (see [cache.Cache.RemoveStrays]). The caller has found
	// no record, and writes none.
	Strays bool
}

// Entry names one cache file: Path when it is set (a corrupt file, or
// one a listing found), else the entry of (Network, the sandbox, IfName).
type Entry struct {
	Network, IfName, Path string
}

// asideMarker is the file in a commit's aside directory that holds the
// record the commit writes (see [Ledger.Commit]).
const asideMarker = ".next"

// Commit makes ch sandbox id's next state: it removes the entries of
// ch.Drop, writes ch.Next as the record, durably, in place of ch.Old, and
// then releases the saved configs that ch.Old links and ch.Next does not,
// and the strays. The caller holds the sandbox's lock.
//
// The record is the commit: the entries are first moved aside (to
// <cache dir>/ocicni/aside/<id>, with the record being written), and
// removed once the record is in place. When err is set, the record and
// the entries are as they were, unless there was no room to set the
// entries aside (a full disk): they are then removed in place first, and
// a record that still names them costs a repeated DEL. A commit cut short by a crash is
// finished or undone under the sandbox's lock next time (see
// [Ledger.recoverCommit]): finished when the record on disk is the one it
// wrote, undone otherwise.
//
// leftover is why something after the record could not be removed (the
// aside directory, released configs, strays): GC removes it later.
func (l *Ledger) Commit(id string, ch Change) (leftover, err error) {
	if err := cache.ValidateContainerID(id); err != nil {
		return nil, err
	}
	if err := l.checkOwnDirs(); err != nil {
		return nil, err // nothing is written through a symlinked state dir
	}
	aside, err := l.setAside(id, ch)
	if err != nil {
		return nil, err
	}
	if !ch.Keep {
		if err := l.writeRecord(id, ch.Old, ch.Next); err != nil {
			return nil, errors.Join(err, aside.putBack())
		}
	}
	var errs []error
	if err := aside.remove(); err != nil {
		errs = append(errs, err)
	}
	if !ch.Keep {
		if err := l.c.ReleaseConfigs(id, unusedConfigs(ch.Old, ch.Next)...); err != nil {
			errs = append(errs, err)
		}
	}
	if ch.Strays {
		if err := l.c.RemoveStrays(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...), nil
}

// writeRecord writes next in place of old, and puts old back when the
// write replaced it but could not make it durable
// ([cache.ErrNotDurable]), so that a failure leaves old.
func (l *Ledger) writeRecord(id string, old, next []cache.Attachment) error {
	err := l.Restore(id, next)
	if err == nil || !errors.Is(err, cache.ErrNotDurable) {
		return err
	}
	if rerr := l.Restore(id, old); rerr != nil {
		return errors.Join(err, fmt.Errorf("putting the old attachment order record back: %w", rerr))
	}
	return err
}

// Restore writes record as sandbox id's order record, or removes it when
// record is empty, and releases nothing: how a caller puts back a record
// that a failed change replaced.
func (l *Ledger) Restore(id string, record []cache.Attachment) error {
	if len(record) == 0 {
		return l.c.RemoveOrder(id)
	}
	return l.c.WriteOrder(id, record)
}

// unusedConfigs returns the config digests that before links and after
// does not.
func unusedConfigs(before, after []cache.Attachment) []string {
	kept := make(map[string]bool, len(after))
	for _, a := range after {
		kept[a.Config] = true
	}
	var out []string
	for _, a := range before {
		if a.Config != "" && !kept[a.Config] {
			kept[a.Config] = true
			out = append(out, a.Config)
		}
	}
	return out
}

// checkOwnDirs refuses a symlink on the way to the directories that the
// ledger writes in itself (see [fsutil.Root.Check]): the aside dirs, and
// the results it moves there; the cache checks its own.
func (l *Ledger) checkOwnDirs() error {
	return l.root().Check(filepath.Join(l.c.Dir(), "ocicni", "aside"), l.c.ResultsDir())
}

// root is the cache dir as the ledger reaches it to write or remove:
// never through a symlink below it (see [fsutil.Root]).
func (l *Ledger) root() fsutil.Root { return fsutil.NewRoot(l.c.Dir()) }

// asideDir returns the directory that a commit of sandbox id moves its
// dropped entries to.
func (l *Ledger) asideDir(id string) string {
	return filepath.Join(l.c.Dir(), "ocicni", "aside", id)
}

// moved is a commit's set of entries moved aside: their paths in the
// results directory, and the aside directory that holds them.
type moved struct {
	root  fsutil.Root
	dir   string
	paths []string
}

// setAside moves the entries that ch drops to sandbox id's aside
// directory, with the record ch writes as its marker, durably. Absent
// entries are skipped. Where they cannot be moved there (no room for the
// directory, or another file system), they are removed in place, and the
// commit is not whole: a failure to write the record then leaves a
// record that names them, which costs a repeated DEL. A failure puts
// back what it moved.
func (l *Ledger) setAside(id string, ch Change) (*moved, error) {
	paths := make([]string, 0, len(ch.Drop))
	for _, e := range ch.Drop {
		p, err := l.entryPath(id, e)
		if err != nil {
			return nil, err
		}
		if _, err := l.root().Lstat(p); err == nil {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return &moved{}, nil
	}
	next := ch.Next
	if ch.Keep {
		next = ch.Old
	}
	if err := l.recoverCommit(id); err != nil { // one that LockSandbox could not
		return nil, err
	}
	m := &moved{root: l.root(), dir: l.asideDir(id)}
	if err := m.begin(next); err != nil {
		// No room for the aside directory (a full disk): removing the
		// entries in place frees some, and leaks nothing (a record that
		// still names them costs a repeated DEL).
		_ = m.remove()
		return &moved{}, removeInPlace(l.root(), id, paths)
	}
	for _, p := range paths {
		err := m.root.Rename(p, filepath.Join(m.dir, filepath.Base(p)))
		switch {
		case err == nil:
			m.paths = append(m.paths, p)
		case errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, syscall.EXDEV): // the results directory is another file system
			if err := removeInPlace(l.root(), id, []string{p}); err != nil {
				return nil, errors.Join(err, m.putBack())
			}
		default:
			return nil, errors.Join(fmt.Errorf("ledger: commit %s: setting an entry aside: %w", id, err), m.putBack())
		}
	}
	if err := syncDirs(l.root(), m.dir, filepath.Dir(paths[0])); err != nil {
		return nil, errors.Join(fmt.Errorf("ledger: commit %s: %w", id, err), m.putBack())
	}
	return m, nil
}

// begin makes the aside directory, with next as its marker.
func (m *moved) begin(next []cache.Attachment) error {
	if err := m.root.MkdirAll(filepath.Dir(m.dir), 0o700); err != nil {
		return err
	}
	if err := m.root.Mkdir(m.dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(orNone(next))
	if err != nil {
		return err
	}
	f, err := m.root.OpenFile(filepath.Join(m.dir, asideMarker), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// entryPath returns the path of the cache file that e names, which must
// be directly inside the results directory.
func (l *Ledger) entryPath(id string, e Entry) (string, error) {
	if e.Path == "" {
		return l.EntryPath(e.Network, id, e.IfName)
	}
	p, err := filepath.Abs(e.Path)
	if err != nil {
		return "", err
	}
	if filepath.Dir(p) != filepath.Clean(l.c.ResultsDir()) {
		return "", fmt.Errorf("ledger: %s: %w", e.Path, cache.ErrOutsideResults)
	}
	return p, nil
}

// putBack moves the entries back where they were, and removes the aside
// directory.
func (m *moved) putBack() error {
	var errs []error
	for _, p := range m.paths {
		if err := m.root.Rename(filepath.Join(m.dir, filepath.Base(p)), p); err != nil {
			errs = append(errs, fmt.Errorf("ledger: putting an entry back: %w", err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // the aside directory keeps them for recovery
	}
	return m.remove()
}

// remove removes the aside directory and the entries in it.
func (m *moved) remove() error {
	if m.dir == "" {
		return nil
	}
	if err := m.root.RemoveAll(m.dir); err != nil {
		return fmt.Errorf("ledger: removing entries set aside: %w", err)
	}
	return nil
}

// recoverCommit finishes or undoes a commit of sandbox id that a crash
// cut short, if there is one: when the record on disk is the one that
// commit wrote, the entries it set aside go; otherwise they go back
// (an entry whose attachment is gone costs at most a repeated DEL). The
// caller holds the sandbox's lock.
func (l *Ledger) recoverCommit(id string) error {
	dir := l.asideDir(id)
	des, err := l.root().ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: recovering a commit of %s: %w", id, err)
	}
	m := &moved{root: l.root(), dir: dir}
	for _, de := range des {
		if de.Name() != asideMarker {
			m.paths = append(m.paths, filepath.Join(l.c.ResultsDir(), de.Name()))
		}
	}
	if l.committed(id, filepath.Join(dir, asideMarker)) {
		return m.remove()
	}
	for _, p := range m.paths {
		if _, err := m.root.Lstat(p); err == nil { // written again since: the newer one stays
			_ = m.root.Remove(filepath.Join(dir, filepath.Base(p)))
		}
	}
	return m.putBack()
}

// committed reports whether sandbox id's record on disk is the one that
// the marker at marker holds; false when either cannot be read.
func (l *Ledger) committed(id, marker string) bool {
	want, err := os.ReadFile(marker)
	if err != nil {
		return false
	}
	var next []cache.Attachment
	if json.Unmarshal(want, &next) != nil {
		return false
	}
	record, err := l.c.ReadOrder(id)
	if err != nil {
		return false
	}
	a, err1 := json.Marshal(orNone(record))
	b, err2 := json.Marshal(orNone(next))
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// Recover repairs what a crash left, at start and before GC reads the
// node: it finishes or undoes every commit cut short (see
// [Ledger.recoverCommit]) whose sandbox nobody holds now, and removes the
// temporary files of writes cut short that no write in flight holds (see
// [cache.Cache.RemoveTemps]). It returns the paths of the temporary files
// removed, and the failures.
func (l *Ledger) Recover() ([]string, error) {
	err := l.recoverCommits()
	removed, terr := l.c.RemoveTemps()
	return removed, errors.Join(err, terr)
}

func (l *Ledger) recoverCommits() error {
	if err := l.checkOwnDirs(); err != nil {
		return err
	}
	des, err := l.root().ReadDir(filepath.Join(l.c.Dir(), "ocicni", "aside"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: listing interrupted commits: %w", err)
	}
	for _, de := range des {
		if cache.ValidateContainerID(de.Name()) != nil {
			continue
		}
		if held, err := l.LockSandbox(context.Background(), de.Name(), true); err == nil {
			held.Release() // taking it recovered the commit
		}
	}
	return nil
}

// orNone returns record, or an empty one for nil, so that both marshal
// alike.
func orNone(record []cache.Attachment) []cache.Attachment {
	if record == nil {
		return []cache.Attachment{}
	}
	return record
}

// removeInPlace removes the entries at paths; absent ones are no error.
func removeInPlace(r fsutil.Root, id string, paths []string) error {
	for _, p := range paths {
		if err := r.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ledger: commit %s: %w", id, err)
		}
	}
	return nil
}

// syncDirs syncs each of dirs (see [fsutil.Root.SyncDir]).
func syncDirs(r fsutil.Root, dirs ...string) error {
	for _, d := range dirs {
		if err := r.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}
