package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/nearest"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/textsafe"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// Version is the fluffy release; overridden at link time by `make build`.
var Version = "0.1.0-dev"

// env is what every subcommand receives instead of reaching for globals.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    hclog.Logger
	// home is $FLUFFY_HOME (default ~/.fluffy).
	home string
	// getenv is os.Getenv in production; tests substitute a map.
	getenv func(string) string
	// isTTY reports whether stdin is an interactive terminal.
	isTTY bool
}

// command is one top-level subcommand. Each lives in its own file and is
// listed in commands().
type command struct {
	name    string
	summary string
	run     func(e *env, args []string) error
}

func main() {
	os.Exit(run(os.Args[1:], newEnv()))
}

func newEnv() *env {
	e := &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		isTTY:  stdinIsTTY(),
	}
	e.log = hclog.New(&hclog.LoggerOptions{
		Name:   "fluffy",
		Level:  hclog.LevelFromString(envOr(e.getenv, "FLUFFY_LOG_LEVEL", "warn")),
		Output: os.Stderr,
	})
	e.home = fluffyHome(e.getenv)
	return e
}

func envOr(get func(string) string, key, def string) string {
	if v := get(key); v != "" {
		return v
	}
	return def
}

func fluffyHome(get func(string) string) string {
	if h := get("FLUFFY_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".fluffy")
	}
	return ".fluffy"
}

// stdinIsTTY reports whether stdin is a terminal: a character device is
// not enough (/dev/null is one, and a prompt there reads no answer).
func stdinIsTTY() bool { return isTerminal(os.Stdin) }

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// run dispatches args and returns the process exit code: 0 success, 1 a
// reported failure, 2 a usage error.
func run(args []string, e *env) int {
	cmds := commands()
	if len(args) > 0 && (isHelpFlag(args[0]) || args[0] == "help") {
		var err error
		if args[0] == "help" {
			err = runHelp(e, args[1:])
		} else {
			err = printHelp(e.stdout, "")
		}
		if err != nil {
			return report(e, err)
		}
		return 0
	}
	if len(args) > 0 {
		for _, c := range cmds {
			if c.name == args[0] {
				// One help for every command and subcommand, however it
				// is asked for (help.go).
				if path, ok := helpRequest(args, helpTopics()); ok {
					if err := printHelp(e.stdout, path); err != nil {
						return report(e, err)
					}
					return 0
				}
				if err := c.run(e, args[1:]); err != nil {
					return report(e, err)
				}
				return 0
			}
		}
	}
	// Not a command: `fluffy [flags] ["task"]` — a one-shot task, or the
	// interactive shell when there is no task. A help flag among the task
	// flags asks for fluffy's help, as it does everywhere.
	if _, ok := helpRequest(append([]string{""}, args...), nil); ok {
		usage(e.stdout, cmds)
		return 0
	}
	f, err := parseTaskFlags(args)
	if err != nil {
		return report(e, err)
	}
	if near := nearCommand(f.prompt, cmds); near != "" {
		return report(e, uerr.New("USAGE", fmt.Sprintf("unknown command %q", textsafe.Line(f.prompt, maxQuoted)),
			"it looks like a mistyped command, not a task", fmt.Sprintf("did you mean `fluffy %s`? To run it as a task, write a sentence: fluffy \"...\"", near)))
	}
	if f.prompt == "" {
		if f.record != "" {
			return report(e, usageErr("fluffy", "--record needs a task: it records one task's model turns, the interactive shell does not record", `give the task on the command line: fluffy --record FILE "..."`))
		}
		return runREPL(e, f)
	}
	return runOneShot(e, f)
}

// nearCommand returns a command name prompt is probably a typo of: a
// single word within two edits of a command.
func nearCommand(prompt string, cmds []command) string {
	if prompt == "" || strings.ContainsAny(prompt, " \t") {
		return ""
	}
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return nearest.Name(prompt, names, 2)
}

// exitCoder lets a command choose its exit status (e.g. conformance: 1 when a
// MUST fails) while still printing a structured error.
type exitCoder interface{ ExitCode() int }

func report(e *env, err error) int {
	if c, ok := err.(exitStatus); ok { // the command already said why
		return int(c)
	}
	ue := uerr.From(err)
	fmt.Fprint(e.stderr, ue.Render())
	e.log.Debug("command failed", "error", err)
	if ec, ok := err.(exitCoder); ok {
		return ec.ExitCode()
	}
	if ue.Code == "USAGE" {
		return 2
	}
	return 1
}

func usage(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "fluffy — a zero-trust, vendor-agnostic AI programming CLI")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: fluffy                          the interactive shell (REPL; /help inside)")
	fmt.Fprintln(w, `       fluffy [flags] "task"           one task, then exit: 0 done or answered, 1 failed, 2 usage, 3 stopped, 4 rejected`)
	fmt.Fprintln(w, "       fluffy <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Task flags: --mode strict|explore|debug  --provider openai|anthropic|ollama|replay  --model NAME")
	fmt.Fprintln(w, "            --yes (no terminal: merge what meets the auto-merge criteria; never answers a review)  --json (events as JSON lines)")
	fmt.Fprintln(w, "            --l1 docker|none (where the kernel runs)  --project DIR  --record FILE (write the model turns to a new cassette)")
	fmt.Fprintln(w, "            --max-cost USD (stop the task once it cost this much; needs the model's prices)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	topics := helpTopics()
	for _, c := range cmds {
		summary := c.summary
		if t, ok := topics[c.name]; ok {
			summary = t.summary
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `fluffy help COMMAND` (or `fluffy COMMAND --help`, `-h`) for a command's subcommands and flags.")
	fmt.Fprintln(w, "Flags may come before or after a command's arguments; `--` ends the flags.")
}

// usageErr builds the structured error for bad arguments. what often
// quotes an argument (a flag parse error does), so it is bounded and
// escaped.
func usageErr(cmd, what, fix string) error {
	return uerr.New("USAGE", textsafe.Line(what, maxQuoted), "the arguments to `fluffy "+cmd+"` are not valid", fix)
}

// maxQuoted bounds the user's or a file's text quoted in an error.
const maxQuoted = 300

// subcommands dispatches `fluffy <parent> <sub> ...` for commands that have
// their own verbs (plugin, policy, audit, ...).
func subcommands(e *env, parent string, args []string, subs map[string]func(*env, []string) error) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		return usageErr(parent, "missing subcommand", "use one of: "+strings.Join(names, ", "))
	}
	f, ok := subs[args[0]]
	if !ok {
		return usageErr(parent, fmt.Sprintf("unknown subcommand %q", args[0]), "use one of: "+strings.Join(names, ", "))
	}
	return f(e, args[1:])
}
