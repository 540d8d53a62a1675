package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// cmd is one command or subcommand of fluffy, defined once: the dispatcher
// runs it, and its help (`fluffy X --help`, `fluffy help X`), the top-level
// usage, the shell completion and docs/cli.md are printed from it. The
// flags help lists are the ones the command parses: both come from the
// same call of flags.
type cmd struct {
	name string
	// args are the positional arguments as the synopsis shows them
	// ("FILE", "[ID]", "PLUGIN TOOL [ARGS_JSON]", "[TASK...]"); the
	// dispatcher refuses any other count.
	args string
	// short is the one line shown in the parent's list; long says more.
	short, long string
	// required flags are shown without brackets and refused when absent.
	required []string
	// hidden commands (internal verbs) are not listed nor documented.
	hidden bool
	// flags declares the command's flags on fs and returns what runs
	// once they are parsed, with the positional arguments. It has no
	// other effect, so help can call it. nil: a group of subcommands.
	flags func(e *env, fs *flag.FlagSet) func(args []string) error
	// rawArgs: the run gets the arguments unparsed and parses fs itself
	// (`mcp add` splits them at `--` first).
	rawArgs bool
	// forms, when set, are the synopses written out (after the command's
	// name) instead of the one generated: for flags that exclude each
	// other. A test parses each against flags and args.
	forms []string
	subs  []*cmd
}

// sub returns the subcommand called name, hidden ones included.
func (c *cmd) sub(name string) *cmd {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// visibleSubs are the subcommands help lists, by name.
func (c *cmd) visibleSubs() []*cmd {
	var out []*cmd
	for _, s := range c.subs {
		if !s.hidden {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (c *cmd) subNames() []string {
	var names []string
	for _, s := range c.visibleSubs() {
		names = append(names, s.name)
	}
	return names
}

// declare returns c's flags, declared on a fresh FlagSet, and its run.
func (c *cmd) declare(e *env, path string) (*flag.FlagSet, func([]string) error) {
	fs := newFlags(path)
	if c.flags == nil {
		return fs, nil
	}
	return fs, c.flags(e, fs)
}

// argCount is how many positional arguments c.args allows (max -1: any).
func (c *cmd) argCount() (min, max int) {
	depth := 0
	for _, w := range strings.Fields(c.args) {
		optional := depth > 0 || strings.HasPrefix(w, "[")
		depth += strings.Count(w, "[") - strings.Count(w, "]")
		if strings.Contains(w, "...") {
			max = -1
		} else if max >= 0 {
			max++
		}
		if !optional {
			min++
		}
	}
	return min, max
}

// walk finds the command args name (root's descendants, hidden included)
// and returns the path to it and the arguments after its name.
func walk(root *cmd, args []string) ([]*cmd, []string) {
	path := []*cmd{root}
	for len(args) > 0 {
		s := path[len(path)-1].sub(args[0])
		if s == nil {
			break
		}
		path = append(path, s)
		args = args[1:]
	}
	return path, args
}

// pathName is "audit log" for the path root → audit → log ("" for root).
func pathName(path []*cmd) string {
	var names []string
	for _, c := range path[1:] {
		names = append(names, c.name)
	}
	return strings.Join(names, " ")
}

// dispatch runs the command args name, or prints its help when a help flag
// stands among its arguments (before `--`).
func dispatch(e *env, root *cmd, args []string) error {
	run, err := resolve(e, root, args)
	if err != nil {
		return err
	}
	return run()
}

// resolve finds the command args name and parses its arguments as its
// definition says (flags, argument count, required flags): a usage error,
// or what runs it. Help is never refused.
func resolve(e *env, root *cmd, args []string) (func() error, error) {
	path, rest := walk(root, args)
	if len(path) == 2 && path[1].name == "help" {
		return func() error { return runHelp(e, root, rest) }, nil // `fluffy help X --help` is X's help
	}
	if wantsHelp(rest) {
		return func() error { return printHelp(e.stdout, e, root, path) }, nil
	}
	c, name := path[len(path)-1], pathName(path)
	fs, run := c.declare(e, strings.TrimSpace("fluffy "+name))
	if run == nil {
		if len(rest) == 0 {
			return nil, usageErr(name, "missing subcommand", "use one of: "+strings.Join(c.subNames(), ", "))
		}
		return nil, usageErr(name, fmt.Sprintf("unknown subcommand %q", rest[0]), "use one of: "+strings.Join(c.subNames(), ", "))
	}
	if c.rawArgs {
		return func() error { return run(rest) }, nil
	}
	fix := "usage: " + strings.Join(synopses(e, path), ", or ") + " (`" + strings.TrimSpace("fluffy help "+name) + "` says more)"
	if err := parseFlags(fs, rest); err != nil {
		return nil, usageErr(name, err.Error(), fix)
	}
	pos := fs.Args()
	min, max := c.argCount()
	switch {
	case len(c.subs) > 0 && max == 0 && len(pos) > 0:
		return nil, usageErr(name, fmt.Sprintf("unknown subcommand %q", pos[0]), "use one of: "+strings.Join(c.subNames(), ", "))
	case len(pos) < min || (max >= 0 && len(pos) > max):
		return nil, usageErr(name, argCountWhat(c, len(pos)), fix)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range c.required {
		if !set[r] {
			return nil, usageErr(name, "--"+r+" is required", fix)
		}
	}
	return func() error { return run(pos) }, nil
}

func argCountWhat(c *cmd, n int) string {
	if c.args == "" {
		return fmt.Sprintf("unexpected arguments: this command takes none, got %d", n)
	}
	return fmt.Sprintf("wrong number of arguments: want %s, got %d", c.args, n)
}

// wantsHelp reports whether a help flag stands among args before `--`.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// isHelpFlag reports whether a is one of the spellings of "help" as a flag.
func isHelpFlag(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

// eachCmd calls f for every command under root (root first, depth first,
// subcommands by name), hidden ones included.
func eachCmd(root *cmd, f func(path []*cmd)) {
	var rec func(path []*cmd)
	rec = func(path []*cmd) {
		f(path)
		c := path[len(path)-1]
		subs := append([]*cmd{}, c.subs...)
		sort.Slice(subs, func(i, j int) bool { return subs[i].name < subs[j].name })
		for _, s := range subs {
			rec(append(append([]*cmd{}, path...), s))
		}
	}
	rec([]*cmd{root})
}
