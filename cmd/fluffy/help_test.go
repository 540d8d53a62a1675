package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// dispatchedSubcommands asks each command for its subcommands the way a
// user finds them (an unknown one lists them), so the tree is checked
// against what the dispatcher really says.
func dispatchedSubcommands(t *testing.T) map[string][]string {
	t.Helper()
	c := newCLI(t)
	out := map[string][]string{}
	for _, cmd := range commandTree().subs {
		_, stderr, code := c.run(cmd.name, "zz-no-such-subcommand")
		_, list, ok := strings.Cut(stderr, "use one of: ")
		if !ok || code != 2 {
			continue // a command without subcommands
		}
		list, _, _ = strings.Cut(list, "\n")
		for _, s := range strings.Split(list, ", ") {
			out[cmd.name] = append(out[cmd.name], strings.TrimSpace(s))
		}
	}
	return out
}

// TestCommandTreeIsComplete: every command says what it does, every flag
// names its value and says what it does, its help prints every flag it
// declares, and an unknown subcommand lists exactly the visible ones.
func TestCommandTreeIsComplete(t *testing.T) {
	root := commandTree()
	subs := dispatchedSubcommands(t)
	if len(subs) < 9 {
		t.Fatalf("found subcommands of only %d commands: %v", len(subs), subs)
	}
	for _, c := range root.subs {
		if len(c.subs) == 0 {
			continue
		}
		if got, want := strings.Join(subs[c.name], ","), strings.Join(c.subNames(), ","); got != want {
			t.Errorf("fluffy %s lists subcommands %q, its definition %q", c.name, got, want)
		}
	}
	// What the flag package names a value without a back-quoted
	// placeholder in its usage: a help that says nothing.
	typeWords := map[string]bool{"string": true, "int": true, "int64": true, "uint": true, "uint64": true, "float": true, "duration": true, "value": true}
	e := docEnv()
	eachCmd(root, func(path []*cmd) {
		c, name := path[len(path)-1], pathName(path)
		if len(path) > 1 && c.short == "" {
			t.Errorf("%q has no short text", name)
		}
		if c.flags == nil && len(c.subs) == 0 {
			t.Errorf("%q neither runs nor has subcommands", name)
		}
		var help bytes.Buffer
		if err := printHelp(&help, e, root, path); err != nil {
			t.Fatal(err)
		}
		fs, _ := c.declare(e, name)
		fs.VisitAll(func(f *flag.Flag) {
			arg, usage := flagArg(f)
			switch {
			case usage == "":
				t.Errorf("%s --%s: no usage", name, f.Name)
			case !isBoolFlag(f) && (arg == "" || typeWords[arg]):
				t.Errorf("%s --%s: its value has no placeholder (write the usage as \"`NAME` what it is\"), got %q", name, f.Name, arg)
			}
			line := flagSpelling(f)
			if arg != "" {
				line += " " + arg
			}
			first, _, _ := strings.Cut(usage, "\n")
			if !strings.Contains(help.String(), "  "+line) || !strings.Contains(help.String(), first) {
				t.Errorf("help of %q does not print its flag %s: %s", name, line, first)
			}
		})
		for _, r := range c.required {
			if fs.Lookup(r) == nil {
				t.Errorf("%q requires --%s, which it does not declare", name, r)
			}
		}
	})
}

// TestCLIDoc: docs/cli.md is the help of every command, as generated from
// the command tree (FLUFFY_UPDATE_DOCS=1 rewrites it).
func TestCLIDoc(t *testing.T) {
	var b bytes.Buffer
	if err := writeCLIDoc(&b, commandTree()); err != nil {
		t.Fatal(err)
	}
	const file = "../../docs/cli.md"
	if os.Getenv("FLUFFY_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != b.String() {
		t.Fatalf("docs/cli.md is stale: regenerate it with FLUFFY_UPDATE_DOCS=1 go test -run TestCLIDoc ./cmd/fluffy/")
	}
}

// TestHelpIsConsistent: `fluffy help X`, `fluffy X --help` and `fluffy X -h`
// print the same text on stdout and succeed, for every command and
// subcommand (before: `version --help` was an error, `plugin --help` an
// unknown subcommand).
func TestHelpIsConsistent(t *testing.T) {
	c := newCLI(t)
	var paths []string
	eachCmd(commandTree(), func(path []*cmd) { paths = append(paths, pathName(path)) })
	sort.Strings(paths)
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p, " ", "_"), func(t *testing.T) {
			words := strings.Fields(p)
			forms := [][]string{
				append([]string{"help"}, words...),
				append(append([]string{}, words...), "--help"),
				append(append([]string{}, words...), "-h"),
			}
			if p != "" && p != "help" {
				// Help wins over other arguments, wherever it stands.
				forms = append(forms, append(append([]string{}, words...), "--json", "x", "--help"))
			}
			var want string
			for i, args := range forms {
				out, stderr, code := c.run(args...)
				if code != 0 || stderr != "" {
					t.Fatalf("fluffy %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
				}
				if i == 0 {
					want = out
					if p != "" && !strings.HasPrefix(out, "Usage: fluffy "+p) {
						t.Fatalf("fluffy %s: no usage line:\n%s", strings.Join(args, " "), out)
					}
					continue
				}
				if out != want {
					t.Fatalf("fluffy %s differs from fluffy help %s:\n%s\n---\n%s", strings.Join(args, " "), p, out, want)
				}
			}
		})
	}
	// A parent's help lists its subcommands.
	out, _, _ := c.run("plugin", "--help")
	for _, s := range []string{"install", "list", "call", "new", "stamp"} {
		if !strings.Contains(out, "\n  "+s+" ") {
			t.Errorf("plugin --help does not list %s:\n%s", s, out)
		}
	}
	if _, stderr, code := c.run("help", "no-such-command"); code != 2 || !strings.Contains(stderr, "fluffy help") {
		t.Errorf("help for an unknown topic: exit %d %q", code, stderr)
	}
}

// TestVersionPrintsAPIRange: version promises the plugin API range; it
// prints it, in text and JSON.
func TestVersionPrintsAPIRange(t *testing.T) {
	c := newCLI(t)
	out, _, code := c.run("version")
	if code != 0 || !strings.Contains(out, "plugin API versions: 1-2") {
		t.Fatalf("version: %d %q", code, out)
	}
	out, _, code = c.run("version", "--json")
	var v struct {
		Version  string `json:"version"`
		Versions []int  `json:"plugin_api_versions"`
		Min, Max int
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("version --json: %v %q", err, out)
	}
	if v.Version != Version || len(v.Versions) != base.APIVersionMax-base.APIVersionMin+1 || v.Versions[0] != base.APIVersionMin {
		t.Fatalf("version --json: %+v", v)
	}
}

// TestPluginListShowsBuiltinsInAFreshHome: builtins are listed whether or
// not a kernel ran before, with STATE registered.
func TestPluginListShowsBuiltinsInAFreshHome(t *testing.T) {
	builtin := t.TempDir()
	dir := buildPlugin(t, "github.com/fluffy-waffle/fluffy/builtin-plugins/tool-fs", "../../builtin-plugins/tool-fs/plugin.yaml")
	if err := os.Rename(dir, filepath.Join(builtin, "tool-fs")); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.vars["FLUFFY_BUILTIN_PLUGINS"] = builtin
	out, stderr, code := c.run("plugin", "list")
	if code != 0 {
		t.Fatalf("plugin list: %d %s", code, stderr)
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "tool-fs" {
			row = f
		}
	}
	if row == nil || row[3] != "registered" {
		t.Fatalf("fresh home: tool-fs not listed as registered:\n%s", out)
	}
	// Every registry command knows the builtins in a fresh home, not only
	// list (disable failed with "no plugin named tool-fs is installed").
	c2 := newCLI(t)
	c2.vars["FLUFFY_BUILTIN_PLUGINS"] = builtin
	if out, stderr, code := c2.run("plugin", "disable", "tool-fs", "--reason", "testing"); code != 0 {
		t.Fatalf("disable a builtin in a fresh home: %d %s%s", code, out, stderr)
	}
	if out, _, _ := c2.run("plugin", "list"); !strings.Contains(out, "disabled") {
		t.Fatalf("after disable:\n%s", out)
	}
}

// TestDevNullIsNotATerminal: install asks only on a terminal; /dev/null is a
// character device but no terminal, so nothing is prompted there and the
// error says there is no terminal to ask (and to pass --yes).
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("/dev/null counted as a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(r) {
		t.Fatal("a pipe counted as a terminal")
	}
}
