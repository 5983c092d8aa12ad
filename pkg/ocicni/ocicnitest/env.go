package ocicnitest

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Env is a manager's world for one test: a [FakeExec] and the
// directories the manager reads and writes, all under one root.
type Env struct {
	Exec     *FakeExec
	ConfDir  string // network configs; see [Env.WriteConflist]
	BinDir   string // the bin dir; FakeExec finds plugins there without files
	CacheDir string // libcni's cache and the manager's order records
	NetNSDir string // stand-in netns files; see [Env.NetNS]
}

// NewEnvAt creates the directories of an Env under root, which it makes
// absolute, and a new FakeExec. It is [NewEnv] for code without a
// testing.TB, such as examples.
func NewEnvAt(root string) (*Env, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	e := &Env{
		Exec:     NewFakeExec(),
		ConfDir:  filepath.Join(root, "net.d"),
		BinDir:   filepath.Join(root, "bin"),
		CacheDir: filepath.Join(root, "cache"),
		NetNSDir: filepath.Join(root, "netns"),
	}
	for _, d := range []string{e.ConfDir, e.BinDir, e.CacheDir, e.NetNSDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// NewEnv returns an Env under tb.TempDir(), which the test removes.
func NewEnv(tb testing.TB) *Env {
	tb.Helper()
	e, err := NewEnvAt(tb.TempDir())
	if err != nil {
		tb.Fatalf("ocicnitest: %v", err)
	}
	return e
}

// Options returns the options that point a manager at the Env, followed
// by extra, which may override them:
//
//   - [ocicni.WithConfDir], [ocicni.WithBinDirs], [ocicni.WithCacheDir]
//     with its directories;
//   - [ocicni.WithExec] and [ocicni.WithNetNSOps] with its FakeExec, so
//     that no plugin runs and no namespace is entered;
//   - [ocicni.WithoutWatcher]: the conf dir is read by New and whenever a
//     requested network is missing, so write configs before New or name
//     the networks in requests;
//   - [ocicni.WithoutHealing]: a DEL the test fails is not retried in the
//     background, so the calls the FakeExec records are the test's own
//     (pass [ocicni.WithHealing] to test healing);
//   - [ocicni.WithLogger] with a logger that discards everything.
func (e *Env) Options(extra ...ocicni.Option) []ocicni.Option {
	log := logrus.New()
	log.SetOutput(io.Discard)
	opts := []ocicni.Option{
		ocicni.WithConfDir(e.ConfDir),
		ocicni.WithBinDirs(e.BinDir),
		ocicni.WithCacheDir(e.CacheDir),
		ocicni.WithExec(e.Exec),
		ocicni.WithNetNSOps(e.Exec),
		ocicni.WithoutWatcher(),
		ocicni.WithoutHealing(),
		ocicni.WithLogger(logrus.NewEntry(log)),
	}
	return append(opts, extra...)
}

// NewManager returns ocicni.New(e.Options(extra...)...), shut down when
// the test ends.
func (e *Env) NewManager(tb testing.TB, extra ...ocicni.Option) *ocicni.Manager {
	tb.Helper()
	m, err := ocicni.New(e.Options(extra...)...)
	if err != nil {
		tb.Fatalf("ocicnitest: new manager: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			tb.Errorf("ocicnitest: manager shutdown: %v", err)
		}
	})
	return m
}

// NetNS is [NewNetNS] in the Env's netns directory.
func (e *Env) NetNS(tb testing.TB, name string) string {
	tb.Helper()
	p, err := NewNetNS(e.NetNSDir, name)
	if err != nil {
		tb.Fatalf("ocicnitest: %v", err)
	}
	return p
}

// WriteConflist is [WriteConflist] in the Env's conf dir.
func (e *Env) WriteConflist(tb testing.TB, name, cniVersion string, plugins ...string) string {
	tb.Helper()
	p, err := WriteConflist(e.ConfDir, name, cniVersion, plugins...)
	if err != nil {
		tb.Fatalf("ocicnitest: %v", err)
	}
	return p
}

// WriteCacheEntry is [WriteCacheEntry] in the Env's cache dir.
func (e *Env) WriteCacheEntry(tb testing.TB, entry CacheEntry) string {
	tb.Helper()
	p, err := WriteCacheEntry(e.CacheDir, entry)
	if err != nil {
		tb.Fatalf("ocicnitest: %v", err)
	}
	return p
}

// WriteOrder is [WriteOrder] in the Env's cache dir.
func (e *Env) WriteOrder(tb testing.TB, containerID string, atts ...cache.Attachment) {
	tb.Helper()
	if err := WriteOrder(e.CacheDir, containerID, atts...); err != nil {
		tb.Fatalf("ocicnitest: %v", err)
	}
}
