package netconf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/containernetworking/cni/pkg/utils"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/seed-671fdd43/ocicni/internal/names"
	"github.com/seed-671fdd43/ocicni/pkg/fakecni"
)

var fuzzExtensions = []string{".conflist", ".conf", ".json"}

// fuzzLoad writes up to two config files and a plugin config in the
// sub-folder of the network "fuzz", loads them twice (the loader's first
// load, then [Loader.Load]), and checks the loader's invariants.
func fuzzLoad(t *testing.T, exts uint8, a, b, sub []byte) {
	t.Helper()
	root := t.TempDir()
	confDir, binDir := filepath.Join(root, "net.d"), filepath.Join(root, "bin")
	for _, d := range []string{confDir, binDir, filepath.Join(confDir, "fuzz")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{filepath.Join(confDir, "10-a"+fuzzExtensions[int(exts&3)%3])}
	write := func(path string, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(files[0], a)
	if len(b) > 0 {
		files = append(files, filepath.Join(confDir, "20-b"+fuzzExtensions[int(exts>>2&3)%3]))
		write(files[1], b)
	}
	if len(sub) > 0 {
		write(filepath.Join(confDir, "fuzz", "10-sub.conf"), sub)
	}

	logger, hook := test.NewNullLogger()
	// The fake finds every plugin type, hostile ones included, by
	// joining it to the first bin dir without looking, and answers
	// VERSION for every spec version. So the loader alone must keep types
	// from escaping the bin dir.
	fx := fakecni.New()
	fx.SetFindMode(fakecni.FindUnchecked)
	cfg := Config{
		ConfDir: confDir, BinDirs: []string{binDir},
		Exec: fx, Log: logrus.NewEntry(logger),
		VersionWait: time.Minute, // every VERSION answers at once: nothing is pending
	}

	var l *Loader
	var published <-chan struct{}
	var sets []*Set
	for i := range 2 {
		done := make(chan error, 1)
		go func() {
			if i == 0 {
				var err error
				l, err = New(cfg)
				done <- err
				return
			}
			published = l.Published()
			done <- l.Load(context.Background())
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("load: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("load did not return within 10s")
		}
		sets = append(sets, l.Snapshot())
	}
	l.Shutdown()
	select {
	case <-published:
	default:
		t.Fatal("the second load published nothing")
	}
	checkSet(t, sets[0], files, hook)
	if got, want := sets[1].Names(), sets[0].Names(); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("a load of the same files loaded %q, then %q", want, got)
	}
	if sets[1].DefaultName() != sets[0].DefaultName() {
		t.Fatalf("a load of the same files changed the default from %q to %q", sets[0].DefaultName(), sets[1].DefaultName())
	}
	fuzzMemory(t, cfg, files, sets[0])
}

// fuzzMemory loads the bytes of files from memory, as config lists named
// after the files, and checks the set as checkSet does. When the files
// read as memory configs do (all ".conflist", no sub-folder plugin), the
// set must be the files' set: both go through the same checks.
func fuzzMemory(t *testing.T, cfg Config, files []string, fromFiles *Set) {
	t.Helper()
	logger, hook := test.NewNullLogger()
	cfg.Log = logrus.NewEntry(logger)
	cfg.Memory = &MemorySource{}
	same := true
	var configs []MemoryConfig
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, MemoryConfig{Name: f, Bytes: data})
		same = same && strings.HasSuffix(f, ".conflist")
	}
	if des, err := os.ReadDir(filepath.Join(cfg.ConfDir, "fuzz")); err != nil || len(des) > 0 {
		same = false
	}
	cfg.Memory.Set(configs...)
	done := make(chan *Loader, 1)
	go func() {
		l, err := New(cfg)
		if err != nil {
			t.Errorf("New: %v", err)
		}
		done <- l
	}()
	var l *Loader
	select {
	case l = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a load from memory did not return within 10s")
	}
	if l == nil {
		return
	}
	l.Shutdown()
	set := l.Snapshot()
	checkSet(t, set, files, hook)
	if !same {
		return
	}
	if got, want := set.Names(), fromFiles.Names(); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("the files loaded %q, the same configs from memory %q", want, got)
	}
	if set.DefaultName() != fromFiles.DefaultName() {
		t.Fatalf("the files' default is %q, memory's %q", fromFiles.DefaultName(), set.DefaultName())
	}
	if got, want := len(set.Skipped()), len(fromFiles.Skipped()); got != want {
		t.Fatalf("the files skipped %d, memory %d: %v, %v", want, got, fromFiles.Skipped(), set.Skipped())
	}
}

func checkSet(t *testing.T, set *Set, files []string, hook *test.Hook) {
	t.Helper()
	loadedFiles := map[string]bool{}
	for name, n := range set.All() {
		checkNetwork(t, name, n)
		loadedFiles[n.File] = true
	}
	if set.DefaultName() != "" && set.Default() == nil {
		t.Fatalf("default network %q is not loaded", set.DefaultName())
	}
	skippedFiles := map[string]bool{}
	for _, sk := range set.Skipped() {
		if sk == nil || sk.Err == nil {
			t.Fatalf("skip without a reason: %#v", sk)
		}
		if skipKind(sk) == nil {
			t.Fatalf("skip reason of no known kind: %v", sk)
		}
		skippedFiles[sk.File] = true
	}
	duplicates := map[string]bool{}
	for _, entry := range hook.AllEntries() {
		if strings.HasPrefix(entry.Message, "Ignoring duplicate network name") {
			duplicates[fmt.Sprint(entry.Data["file"])] = true
		}
	}
	for _, f := range files {
		if !loadedFiles[f] && !skippedFiles[f] && !duplicates[f] {
			t.Fatalf("%s was neither loaded, nor skipped with a reason, nor a duplicate", filepath.Base(f))
		}
	}
}

// checkNetwork checks a loaded network: filed under its own name, a name
// that requests and libcni accept, and plugins whose types stay in the
// bin dir.
func checkNetwork(t *testing.T, name string, n *Network) {
	t.Helper()
	if name != n.Name || name != n.List.Name {
		t.Fatalf("network %q is filed as %q", n.List.Name, name)
	}
	if err := names.ValidateName("network name", name); err != nil {
		t.Fatalf("loaded network name fails a request's validation: %v", err)
	}
	if err := utils.ValidateNetworkName(name); err != nil {
		t.Fatalf("loaded network name fails libcni's validation: %v", err)
	}
	if len(name) > names.MaxNetworkNameLen {
		t.Fatalf("loaded network name is %d bytes long", len(name))
	}
	if len(n.List.Plugins) == 0 {
		t.Fatalf("network %q has no plugins", name)
	}
	for _, p := range n.List.Plugins {
		typ := p.Network.Type
		if typ == "" || typ == "." || typ == ".." || strings.ContainsAny(typ, `/\`) ||
			strings.ContainsFunc(typ, unicode.IsControl) {
			t.Fatalf("network %q has plugin type %q", name, typ)
		}
	}
}

// FuzzLoadConfig loads arbitrary config files. Its seeds, in
// testdata/fuzz/FuzzLoadConfig, run with every go test.
func FuzzLoadConfig(f *testing.F) {
	f.Add(uint8(0), []byte(conflistOf("a", "good")), []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, exts uint8, a, b, sub []byte) {
		fuzzLoad(t, exts, a, b, sub)
	})
}
