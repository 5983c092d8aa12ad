// Command ocicnitool lets an operator attach a network namespace to CNI
// networks, detach it, check it, collect stale attachments and inspect the
// CNI cache on a node, through the same library a container runtime uses
// (github.com/seed-671fdd43/ocicni/pkg/ocicni and pkg/cache).
//
// Run "ocicnitool help" for the commands, and "ocicnitool help COMMAND" for
// one command's flags and examples. The exit codes are listed in both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

const progName = "ocicnitool"

// command is one subcommand. setup registers its flags on fs and returns
// the function that runs it with the positional arguments.
type command struct {
	name     string // "add", or "cache ls" for a command group
	synopsis string // arguments, after the name
	summary  string // one line, for the command list
	help     string // description and examples
	setup    func(fs *flag.FlagSet, g *globals, out *printer) func(ctx context.Context, args []string) error
}

// commands lists the subcommands in the order the help shows them.
var commands = []*command{
	addCmd, delCmd, checkCmd, statusCmd, gcCmd, pendingCmd, statsCmd, cacheLsCmd, cacheRmCmd,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	lead, words := leadingGlobals(args)
	if len(words) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch words[0] {
	case "help", "-h", "-help", "--help":
		return runHelp(words[1:], stdout, stderr)
	}
	cmd, rest := lookup(words)
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s help' for usage.\n", progName, unknownCommand(words), progName)
		return exitUsage
	}

	fs := flag.NewFlagSet(progName+" "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed below
	g := &globals{stderr: stderr}
	out := &printer{w: stdout}
	exec := cmd.setup(fs, g, out)
	pos, err := parseArgs(fs, dropUnusedGlobals(fs, append(lead, rest...)))
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, cmd, fs)
		return exitOK
	}
	if err != nil {
		err = usageErr(err)
	} else {
		out.json = g.json
		err = exec(ctx, pos)
	}
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", progName, cmd.name, err)
		if code == exitUsage {
			fmt.Fprintf(stderr, "Run '%s help %s' for usage.\n", progName, cmd.name)
		}
	}
	return code
}

// lookup finds the command named by the first one or two words of args
// and returns it with the remaining arguments.
func lookup(args []string) (*command, []string) {
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return c, args[len(words):]
		}
	}
	return nil, nil
}

// unknownCommand explains an unknown command line: an unknown command, or
// a command group such as "cache" without a known subcommand.
func unknownCommand(args []string) string {
	var subs []string
	for _, c := range commands {
		if group, sub, ok := strings.Cut(c.name, " "); ok && group == args[0] {
			subs = append(subs, sub)
		}
	}
	switch {
	case len(subs) == 0:
		return fmt.Sprintf("unknown command %q", args[0])
	case len(args) == 1:
		return fmt.Sprintf("%s: want a subcommand: %s", args[0], strings.Join(subs, ", "))
	}
	return fmt.Sprintf("%s: unknown subcommand %q, want one of: %s", args[0], args[1], strings.Join(subs, ", "))
}

// runHelp prints the general help, or one command's.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stdout)
		return exitOK
	}
	cmd, rest := lookup(args)
	if cmd == nil || len(rest) > 0 {
		fmt.Fprintf(stderr, "%s help: unknown command %q\n", progName, strings.Join(args, " "))
		return exitUsage
	}
	fs := flag.NewFlagSet(progName+" "+cmd.name, flag.ContinueOnError)
	cmd.setup(fs, &globals{stderr: stderr}, &printer{w: stdout})
	printCommandHelp(stdout, cmd, fs)
	return exitOK
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, `%[1]s attaches network namespaces to CNI networks and detaches them, through
the ocicni library, and inspects libcni's cache on this node. Run it as root.

Usage:
  %[1]s [global flags] COMMAND [flags] [arguments]
  %[1]s help COMMAND

Commands:
`, progName)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nGlobal flags (each command takes those it uses; %q lists them):\n", "help COMMAND")
	printGlobalFlags(w)
	fmt.Fprintf(w, `
NETNS is a path, or the name of a namespace pinned under %[2]s (as
"ip netns add" does). Flags take one or two dashes and may come anywhere
on the line, before the command too; a command ignores the global flags
it does not use; "--" ends the flags.

Examples:
  %[1]s add --network mynet blue 3f2a9c
  %[1]s del blue 3f2a9c
  %[1]s cache ls --json

%[3]s`, progName, netnsRunDir, exitCodesHelp)
}

// globalFlags are the flags the overview lists, in its order, with the
// name of their argument.
var globalFlags = []struct{ name, arg string }{
	{"conf-dir", "DIR"},
	{"bin-dir", "DIR"},
	{"cache-dir", "DIR"},
	{"json", ""},
	{"timeout", "DURATION"},
	{"debug", ""},
}

// printGlobalFlags lists globalFlags with their usage and default, from
// the flags the commands register, so that the defaults shown are the
// ones that apply.
func printGlobalFlags(w io.Writer) {
	fs := flag.NewFlagSet(progName, flag.ContinueOnError)
	g := &globals{}
	g.dirFlags(fs)
	g.outputFlags(fs)
	g.runFlags(fs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, gf := range globalFlags {
		f := fs.Lookup(gf.name)
		usage := f.Usage
		if gf.arg != "" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  --%s %s\t%s\n", gf.name, gf.arg, usage)
	}
	_ = tw.Flush() // as for the Fprintfs around it, a failed write of the help has nowhere to go
}

func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s %s\n\n%s\n", progName, c.name, c.synopsis, strings.TrimSpace(c.help))
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\n%s", exitCodesHelp)
}
