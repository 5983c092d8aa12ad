package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// TestUsageErrors checks that bad command lines exit 1, say why, and run
// nothing.
func TestUsageErrors(t *testing.T) {
	dirs := []string{"--conf-dir", t.TempDir(), "--bin-dir", t.TempDir(), "--cache-dir", t.TempDir()}
	notANetNS := filepath.Join(t.TempDir(), "ns") // never created: usage errors come first
	for _, tc := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{name: "no command", args: nil, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"frob"}, wantStderr: `unknown command "frob"`},
		{name: "group without subcommand", args: []string{"cache"}, wantStderr: "want a subcommand: ls, rm"},
		{name: "unknown subcommand", args: []string{"cache", "mv"}, wantStderr: `unknown subcommand "mv"`},
		{name: "unknown flag", args: []string{"add", "--bogus", "ns", "id"}, wantStderr: "flag provided but not defined: -bogus"},
		{name: "bad duration", args: []string{"del", "--timeout", "soon", "id"}, wantStderr: "invalid value"},
		{name: "add without container", args: []string{"add", "ns"}, wantStderr: "want arguments NETNS CONTAINER-ID"},
		{name: "add with three arguments", args: []string{"add", "a", "b", "c"}, wantStderr: "want arguments"},
		{name: "del without container", args: []string{"del"}, wantStderr: "want arguments [NETNS] CONTAINER-ID"},
		{name: "status with one argument", args: []string{"status", "ns"}, wantStderr: "want arguments"},
		{name: "network without name", args: append([]string{"add", "--network", ":eth0", notANetNS, "id"}, dirs...), wantStderr: `--network ":eth0"`},
		{name: "empty netns", args: []string{"del", "", "id"}, wantStderr: "empty NETNS"},
		{name: "invalid container ID", args: append([]string{"del", "bad/id"}, dirs...), wantStderr: `invalid container ID "bad/id"`},
		{name: "gc without valid containers", args: append([]string{"gc"}, dirs...), wantStderr: "--valid"},
		{name: "gc with both", args: append([]string{"gc", "--all", "--valid", "x"}, dirs...), wantStderr: "exclude each other"},
		{name: "gc with an invalid ID", args: append([]string{"gc", "--valid", "a/b"}, dirs...), wantStderr: "--valid"},
		{name: "gc with an empty list", args: append([]string{"gc", "--valid", ""}, dirs...), wantStderr: "--valid"},
		{name: "cache rm without container", args: []string{"cache", "rm"}, wantStderr: "--container is required"},
		{name: "stats with an argument", args: []string{"stats", "extra"}, wantStderr: "want arguments none"},
		{name: "pending with an argument", args: []string{"pending", "extra"}, wantStderr: "want arguments none"},
		{name: "cache ls with an argument", args: []string{"cache", "ls", "extra"}, wantStderr: "want arguments none"},
		{name: "cache ls with an invalid container", args: []string{"cache", "ls", "--container", "../x"}, wantStderr: "invalid container ID"},
		{name: "empty conf dir", args: []string{"status", "--conf-dir", ""}, wantStderr: "--conf-dir must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRun(t, exitUsage, tc.args...)
			assert.Contains(t, r.stderr, tc.wantStderr)
			assert.Empty(t, r.stdout)
		})
	}
}

// TestHelp checks that every command has help with examples and the exit
// codes, through "help COMMAND" and "COMMAND -h", on stdout with exit 0.
func TestHelp(t *testing.T) {
	r := mustRun(t, exitOK, "help")
	for _, c := range commands {
		assert.Contains(t, r.stdout, "  "+c.name+" ")
	}
	assert.Contains(t, r.stdout, exitCodesHelp)

	for _, c := range commands {
		words := strings.Fields(c.name)
		for _, args := range [][]string{
			append([]string{"help"}, words...),
			append(words, "-h"),
			append(words, "--help"),
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				r := mustRun(t, exitOK, args...)
				assert.Contains(t, r.stdout, "Usage: "+progName+" "+c.name)
				_, examples, ok := strings.Cut(r.stdout, "\nExamples:\n")
				if assert.True(t, ok, "no examples") {
					assert.Contains(t, examples, "\n  "+progName+" "+c.name+" ")
				}
				assert.Contains(t, r.stdout, "\nFlags:\n")
				assert.Contains(t, r.stdout, "4  partial teardown")
			})
		}
	}
	r = mustRun(t, exitUsage, "help", "nope")
	assert.Contains(t, r.stderr, "unknown command")
}

// TestREADMEListsEveryCommand checks that the README's command table has
// a row for every command.
func TestREADMEListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for _, c := range commands {
		// Not assert.Contains, which would quote the whole README.
		if !strings.Contains(string(readme), "\n| `"+c.name) {
			t.Errorf("no row for %q in README.md's command table", c.name)
		}
	}
}

// TestHelpListsGlobalFlags checks that the overview, whichever way it is
// asked for, lists the directory flags with their defaults.
func TestHelpListsGlobalFlags(t *testing.T) {
	defaults := map[string]string{
		"conf-dir":  ocicni.DefaultConfDir,
		"bin-dir":   ocicni.DefaultBinDir,
		"cache-dir": defaultCacheDir,
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		stderr   bool // the overview goes to stderr
	}{
		{name: "help", args: []string{"help"}},
		{name: "--help", args: []string{"--help"}},
		{name: "-h", args: []string{"-h"}},
		{name: "no arguments", wantCode: exitUsage, stderr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRun(t, tc.wantCode, tc.args...)
			overview := r.stdout
			if tc.stderr {
				overview = r.stderr
			}
			for flagName, def := range defaults {
				assert.Regexp(t, `(?m)^  --`+flagName+` DIR +\S.*\(default `+regexp.QuoteMeta(def)+`\)$`, overview)
			}
		})
	}
}
