package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// PluginDirEnv names the environment variable that points at a directory of
// prebuilt plugins. When it holds every plugin, [BuildPlugins] uses it as is.
const PluginDirEnv = "OCICNI_TEST_PLUGIN_DIR"

// Recorder is the binary name of the fault-injecting fake plugin from
// internal/testplugins/recorder.
const Recorder = "recorder"

// ReferencePlugins lists the binary names of the reference plugins built
// from the tools module. It must match the tool directives of tools/go.mod,
// which TestReferencePluginsMatchToolsGoMod checks. (It is not read from
// that file at run time: a prebuilt $OCICNI_TEST_PLUGIN_DIR needs no
// checkout, and go:embed cannot reach into another module.)
var ReferencePlugins = []string{
	"bandwidth", "bridge", "firewall", "host-device", "host-local",
	"loopback", "macvlan", "portmap", "ptp", "static", "tuning",
}

// RequireRoot skips the test unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(RequireRootEnv) != "" {
		tb.Fatalf("needs root, and $%s says this run must not skip it", RequireRootEnv)
	}
	tb.Skip("skipping: needs root")
}

// RequireRootEnv names the environment variable that turns the skip of
// [RequireRoot] into a failure: CI sets it when it runs as root, so that
// no root-only test can silently stop running there.
const RequireRootEnv = "OCICNI_TEST_REQUIRE_ROOT"

// MainWithPlugins is a TestMain body. As root, it builds the plugins, stores
// their directory in *dir, runs the tests and removes the directory. As any
// other user it leaves *dir empty and just runs the tests. It returns the
// exit code for os.Exit.
func MainWithPlugins(m *testing.M, dir *string) int {
	if os.Geteuid() != 0 {
		return m.Run()
	}
	d, err := BuildPlugins()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*dir = d
	defer func() {
		if err := RemovePlugins(d); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}()
	return m.Run()
}

// BuildPlugins builds every plugin in [ReferencePlugins] and the [Recorder]
// into a fresh temporary directory and returns it; the caller removes it
// with [RemovePlugins]. If $OCICNI_TEST_PLUGIN_DIR names a directory that
// holds all of them, BuildPlugins returns that directory and builds nothing.
//
// It needs the go command in PATH, which go test provides.
func BuildPlugins() (dir string, err error) {
	if env := os.Getenv(PluginDirEnv); env != "" && hasPlugins(env) {
		return env, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	stage, err := stageDir(root)
	if err != nil {
		return "", err
	}
	unlock, err := lockDir(stage)
	if err != nil {
		return "", err
	}
	defer unlock()

	var wg sync.WaitGroup
	var toolsErr, recErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		toolsErr = goBuild(filepath.Join(root, "tools"), stage+string(filepath.Separator), "tool")
	}()
	go func() {
		defer wg.Done()
		recErr = goBuild(root, filepath.Join(stage, Recorder), "./internal/testplugins/recorder")
	}()
	wg.Wait()
	if err := errors.Join(toolsErr, recErr); err != nil {
		return "", err
	}

	dir, err = os.MkdirTemp("", "ocicni-plugins-")
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	for _, name := range allPlugins() {
		if err := linkOrCopy(filepath.Join(stage, name), filepath.Join(dir, name)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// RemovePlugins removes a directory returned by [BuildPlugins], unless it
// is the prebuilt $OCICNI_TEST_PLUGIN_DIR.
func RemovePlugins(dir string) error {
	if dir == "" || dir == os.Getenv(PluginDirEnv) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("testenv: remove plugins: %w", err)
	}
	return nil
}

// RepoRoot returns the root of the ocicni checkout, found from this source
// file's location.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("testenv: cannot locate the repository (built with -trimpath?); set %s", PluginDirEnv)
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
}

func allPlugins() []string {
	return append(append([]string(nil), ReferencePlugins...), Recorder)
}

// hasPlugins reports whether dir holds every plugin.
func hasPlugins(dir string) bool {
	for _, name := range allPlugins() {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// stageDir returns the persistent build directory for the checkout at root.
// go build skips re-linking binaries there that are already up to date.
func stageDir(root string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "ocicni-testenv", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// lockDir takes an exclusive flock on dir/.lock and returns its release.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("testenv: lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// MainWithBinary is the TestMain of a package whose tests run its own
// binary: it builds the package in the current directory (the one under
// test) as name into a temporary directory, with -race when race is set,
// points *bin at it, and returns run's exit code (run is m.Run, or a
// [MainWithPlugins] call), removing the binary afterwards.
func MainWithBinary(name string, race bool, bin *string, run func() int) int {
	dir, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, name)
	args := []string{"build", "-o", *bin}
	if race {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", name, err, out)
		return 1
	}
	return run()
}

// goBuild runs "go build -o out pkgs..." in dir.
func goBuild(dir, out string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = dir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: go build %v in %s: %w\n%s", pkgs, dir, err, output)
	}
	return nil
}

// linkOrCopy hard-links src to dst, copying when a link is impossible.
// go build replaces rather than rewrites its outputs, so a later build does
// not change a linked binary.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("testenv: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("testenv: copy %s: %w", src, err)
	}
	return nil
}
