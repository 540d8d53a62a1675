package main

import (
	"flag"
	"io"
	"strings"
)

// Every command parses its arguments with parseFlags, so flags may come
// before, between and after positional arguments everywhere, and `--`
// ends the flags everywhere (what follows it is positional even when it
// starts with "-").

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args into fs with flags anywhere among the positional
// arguments; afterwards fs.Args() holds the positionals in their order.
// A flag that takes a value takes the next argument as its value when it
// is not written --flag=value, as the flag package does.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return err
	}
	// Parsed again after a "--" so that fs.Args() is exactly the
	// positionals (the flag package sets nothing for them).
	return fs.Parse(append([]string{"--"}, pos...))
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// projectDirFlag declares --project, the project a command works on.
func projectDirFlag(fs *flag.FlagSet) *string {
	return fs.String("project", ".", "`DIR` the project directory")
}

// strList is a repeatable string flag.
type strList []string

func (l *strList) String() string     { return strings.Join(*l, ",") }
func (l *strList) Set(s string) error { *l = append(*l, s); return nil }
func (*strList) repeatable()          {}

// parseInterspersed is parseFlags returning the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return fs.Args(), nil
}
