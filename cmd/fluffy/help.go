package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Help is printed from the command tree (commands.go): `fluffy help X Y`,
// `fluffy X Y --help` and `fluffy X Y -h` all print exactly the same text
// (to stdout, exit 0), and docs/cli.md is that text for every command.

// repeatable is a flag Value that may be given more than once.
type repeatable interface{ repeatable() }

// flagSpelling is how a flag is written: -o, --project.
func flagSpelling(f *flag.Flag) string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// flagArg is the placeholder of a flag's value and its usage: a usage
// "`DIR` the project directory" names DIR; otherwise the back-quoted word
// in it does, as the flag package has it. "" for a boolean flag.
func flagArg(f *flag.Flag) (arg, usage string) {
	if u, ok := strings.CutPrefix(f.Usage, "`"); ok {
		if name, rest, ok := strings.Cut(u, "` "); ok && !strings.Contains(name, "`") {
			return name, rest
		}
	}
	arg, usage = flag.UnquoteUsage(f)
	if isBoolFlag(f) {
		arg = ""
	}
	return arg, usage
}

// flagSynopsis is "[--since T]", "--syscall S" when required, "[--tag T]...".
func flagSynopsis(c *cmd, f *flag.Flag) string {
	s := flagSpelling(f)
	if arg, _ := flagArg(f); arg != "" {
		s += " " + arg
	}
	required := false
	for _, r := range c.required {
		required = required || r == f.Name
	}
	if !required {
		s = "[" + s + "]"
	}
	if _, ok := f.Value.(repeatable); ok {
		s += "..."
	}
	return s
}

// synopses are the usage lines of the command at path: its forms, or the
// one generated from its arguments and flags.
func synopses(e *env, path []*cmd) []string {
	c := path[len(path)-1]
	if len(c.forms) == 0 {
		return []string{synopsis(e, path)}
	}
	var out []string
	for _, f := range c.forms {
		out = append(out, strings.Join(append(append([]string{"fluffy"}, strings.Fields(pathName(path))...), f), " "))
	}
	return out
}

// synopsis is the generated usage line of the command at path: its name,
// its positional arguments, then every flag it declares (before a `--` in
// its arguments, which ends the flags).
func synopsis(e *env, path []*cmd) string {
	c := path[len(path)-1]
	fs, _ := c.declare(e, "")
	return synopsisOf(strings.TrimSpace("fluffy "+pathName(path)), c, fs)
}

// synopsisOf is the usage line of c, called name, whose flags are in fs.
func synopsisOf(name string, c *cmd, fs *flag.FlagSet) string {
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, flagSynopsis(c, f)) })
	args, tail, dashes := strings.Cut(c.args, "-- ")
	words := []string{name}
	if name == "fluffy" {
		// fluffy's own arguments are a task, which reads best last.
		words = append(append(words, flags...), strings.Fields(args)...)
	} else {
		words = append(append(words, strings.Fields(args)...), flags...)
	}
	if dashes {
		words = append(words, "--", tail)
	}
	return strings.Join(words, " ")
}

// writeFlags lists the flags of fs, one a line, with their default and
// whether they repeat; a usage of several lines stays indented.
func writeFlags(w io.Writer, c *cmd, fs *flag.FlagSet) {
	var left, right []string
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flagArg(f)
		l := flagSpelling(f)
		if arg != "" {
			l += " " + arg
		}
		var notes []string
		for _, r := range c.required {
			if r == f.Name {
				notes = append(notes, "required")
			}
		}
		if _, ok := f.Value.(repeatable); ok && !strings.Contains(usage, "repeatable") {
			notes = append(notes, "repeatable")
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" && !strings.Contains(usage, "(default") {
			notes = append(notes, "default "+d)
		}
		if len(notes) > 0 {
			usage += " (" + strings.Join(notes, "; ") + ")"
		}
		left, right = append(left, l), append(right, usage)
	})
	// A flag wider than maxFlagColumn has its usage on the next line.
	const maxFlagColumn = 20
	width := 0
	for _, l := range left {
		if len(l) <= maxFlagColumn {
			width = max(width, len(l))
		}
	}
	for i, l := range left {
		lines := strings.Split(right[i], "\n")
		if len(l) > width {
			fmt.Fprintf(w, "  %s\n", l)
		} else {
			fmt.Fprintf(w, "  %-*s  %s\n", width, l, lines[0])
			lines = lines[1:]
		}
		for _, more := range lines {
			fmt.Fprintf(w, "  %-*s  %s\n", width, "", more)
		}
	}
}

// printHelp writes the help of the command at path.
func printHelp(w io.Writer, e *env, root *cmd, path []*cmd) error {
	if len(path) == 1 {
		usage(w, e, root)
		return nil
	}
	c := path[len(path)-1]
	name := pathName(path)
	fs, run := c.declare(e, "")
	if run != nil {
		for i, s := range synopses(e, path) {
			fmt.Fprintf(w, "%s%s\n", map[bool]string{true: "Usage: ", false: "       "}[i == 0], s)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "Usage: fluffy %s SUBCOMMAND\n\n", name)
	}
	fmt.Fprintf(w, "%s.\n", upperFirst(c.short))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s", c.long)
	}
	if hasFlags(fs) {
		fmt.Fprintln(w, "\nFlags:")
		writeFlags(w, c, fs)
	}
	if subs := c.visibleSubs(); len(subs) > 0 {
		width := 0
		for _, s := range subs {
			width = max(width, len(s.name))
		}
		fmt.Fprintln(w, "\nSubcommands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.short)
		}
		fmt.Fprintf(w, "\nRun `fluffy help %s SUBCOMMAND` (or `fluffy %s SUBCOMMAND --help`) for its flags.\n", name, name)
	}
	return nil
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// usage is fluffy's own help: the three ways to run it, the task flags,
// the commands.
func usage(w io.Writer, e *env, root *cmd) {
	fmt.Fprintln(w, "fluffy — a zero-trust, vendor-agnostic AI programming CLI")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: fluffy                          the interactive shell (REPL; /help inside)")
	fmt.Fprintln(w, "       "+synopsis(e, []*cmd{root}))
	fmt.Fprintln(w, "                                      one task, then exit: 0 done or answered, 1 failed, 2 usage, 3 stopped, 4 rejected")
	fmt.Fprintln(w, "       fluffy <command> [arguments]")
	fmt.Fprintln(w)
	if root.long != "" {
		fmt.Fprint(w, root.long)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Task flags:")
	fs, _ := root.declare(e, "")
	writeFlags(w, root, fs)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	subs := root.visibleSubs()
	width := 0
	for _, c := range subs {
		width = max(width, len(c.name))
	}
	for _, c := range subs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `fluffy help COMMAND` (or `fluffy COMMAND --help`, `-h`) for a command's subcommands and flags.")
	fmt.Fprintln(w, "Flags may come before or after a command's arguments; `--` ends the flags.")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// helpFlags is `fluffy help`: no flags; dispatch hands it its arguments
// as they are, so `fluffy help X --help` is X's help.
func helpFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return runHelp(e, commandTree(), args) }
}

// runHelp implements `fluffy help [COMMAND [SUBCOMMAND]]`.
func runHelp(e *env, root *cmd, args []string) error {
	if len(args) > 0 && isHelpFlag(args[len(args)-1]) {
		args = args[:len(args)-1] // `fluffy help X --help` is `fluffy help X`
		if len(args) == 0 {
			args = []string{"help"}
		}
	}
	if len(args) > 2 {
		return uerr.New("USAGE", "too many arguments to `fluffy help`", "help takes a command and at most one subcommand", "run `fluffy help COMMAND [SUBCOMMAND]`")
	}
	path, rest := walk(root, args)
	if len(rest) > 0 {
		return usageErr("help", fmt.Sprintf("no help for %q", strings.Join(args, " ")), "run `fluffy help` for the list of commands")
	}
	return printHelp(e.stdout, e, root, path)
}

// docEnv is the environment docs/cli.md is printed in: no variables set,
// so defaults read from the environment show as they are without it.
func docEnv() *env {
	return &env{getenv: func(string) string { return "" }, home: "$FLUFFY_HOME", stdout: io.Discard, stderr: io.Discard}
}

// writeCLIDoc writes docs/cli.md: the help of every command.
func writeCLIDoc(w io.Writer, root *cmd) error {
	e := docEnv()
	fmt.Fprintln(w, "# fluffy's command line")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "<!-- Generated from the command tree (cmd/fluffy/commands.go); do not edit.")
	fmt.Fprintln(w, "     Regenerate: FLUFFY_UPDATE_DOCS=1 go test -run TestCLIDoc ./cmd/fluffy/ -->")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command's help, as `fluffy help COMMAND [SUBCOMMAND]` (or `--help`) prints it.")
	var err error
	eachCmd(root, func(path []*cmd) {
		for _, c := range path {
			if c.hidden {
				return
			}
		}
		title := strings.TrimSpace("fluffy " + pathName(path))
		fmt.Fprintf(w, "\n## %s\n\n```text\n", title)
		if perr := printHelp(w, e, root, path); perr != nil && err == nil {
			err = perr
		}
		fmt.Fprintln(w, "```")
	})
	return err
}
