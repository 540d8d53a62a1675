package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// usageLine is one documented command line and where it is written.
type usageLine struct {
	where string
	words []string
}

// TestEveryDocumentedUsageRuns walks every `fluffy …` command line that
// README.md, docs/*.md (not the decision log) and every --help print, with
// placeholders (FILE, NAME, …) replaced by safe values, and runs each in a
// fresh project and home the way a user types it: none may be refused as a
// usage error (exit 2, code USAGE). A usage synopsis runs twice, with every
// optional part and with none; its flags are also moved in front of its
// positional arguments. Lines that do something (install, call, run a task)
// fail for a reason of their own (no such plugin, no provider): that is
// fine here; only a refusal of the command line is not.
func TestEveryDocumentedUsageRuns(t *testing.T) {
	bin := testbin.Build(t, "cmd/fluffy")
	w := newUsageWalk(t, bin)
	lines := append(helpUsageLines(t), docUsageLines(t)...)
	if len(lines) < 60 {
		t.Fatalf("found only %d documented command lines: the extraction is broken", len(lines))
	}
	seen := map[string]bool{}
	ran := 0
	for _, l := range lines {
		args := w.substitute(l.words)
		key := strings.Join(args, "\x00")
		if seen[key] {
			continue
		}
		seen[key] = true
		ran++
		start := time.Now()
		code, stderr, timedOut := w.run(args, false)
		if code == 2 && strings.Contains(stderr, "terminal") {
			// Valid on a terminal (a command that asks): typed there,
			// every question answered with its default.
			code, stderr, timedOut = w.run(args, true)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Logf("%s: `fluffy %s` took %s", l.where, strings.Join(args, " "), d.Round(time.Millisecond))
		}
		if code == 2 || strings.Contains(stderr, "Code: USAGE") {
			t.Errorf("%s: `fluffy %s` is refused as a usage error (exit %d):\n%s", l.where, strings.Join(args, " "), code, stderr)
		} else if timedOut {
			t.Logf("%s: `fluffy %s` was still running after %s (accepted)", l.where, strings.Join(args, " "), walkTimeout)
		}
	}
	t.Logf("ran %d distinct command lines from %d documented ones", ran, len(lines))
}

// TestDocumentedInvocationsParse: every command line the help, docs/cli.md,
// README.md and docs/*.md show is accepted by its command's definition,
// in-process and without running it: the command exists, its flags are
// declared, its argument count and required flags are right. It is the
// fast half of TestEveryDocumentedUsageRuns (placeholders substituted the
// same way), and it also covers the forms written out by hand.
func TestDocumentedInvocationsParse(t *testing.T) {
	w := &usageWalk{t: t, project: t.TempDir(), tmp: t.TempDir(), cassette: "c.jsonl", policyFile: "p.yaml"}
	root := commandTree()
	lines := append(helpUsageLines(t), docUsageLines(t)...)
	if len(lines) < 100 {
		t.Fatalf("found only %d documented command lines: the extraction is broken", len(lines))
	}
	checked := 0
	for _, l := range lines {
		args := w.substitute(l.words)
		e := docEnv()
		var out bytes.Buffer
		e.stdout = &out
		path, rest := walk(root, args)
		c := path[len(path)-1]
		if c.rawArgs && !wantsHelp(rest) {
			if c.name == "stub-kernel" {
				continue // its arguments are its own
			}
			// Its flags end at `--` (mcp add): those must parse.
			before, _, _ := strings.Cut(strings.Join(rest, "\x00"), "\x00--")
			fs, _ := c.declare(e, pathName(path))
			if err := parseFlags(fs, strings.FieldsFunc(before, func(r rune) bool { return r == 0 })); err != nil {
				t.Errorf("%s: `fluffy %s`: %v", l.where, strings.Join(args, " "), err)
			}
			checked++
			continue
		}
		run, err := resolve(e, root, args)
		if err != nil {
			t.Errorf("%s: `fluffy %s` is refused:\n%s", l.where, strings.Join(args, " "), uerr.From(err).Render())
			continue
		}
		checked++
		if len(path) == 2 && path[1].name == "help" || wantsHelp(rest) {
			if err := run(); err != nil { // help has no side effect: run it
				t.Errorf("%s: `fluffy %s`: %v", l.where, strings.Join(args, " "), err)
			}
		}
	}
	t.Logf("checked %d documented command lines", checked)
}

const walkTimeout = 10 * time.Second

type usageWalk struct {
	t             *testing.T
	bin           string
	home, project string
	tmp           string
	policyFile    string
	cassette      string
	n             int
}

func newUsageWalk(t *testing.T, bin string) *usageWalk {
	// A short home: the kernel's sockets live below it (108-byte limit).
	home, err := os.MkdirTemp("", "fw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	w := &usageWalk{t: t, bin: bin, home: home, project: t.TempDir(), tmp: t.TempDir()}
	// A project fluffy did not shape: a Go module with code at the root.
	for name, content := range map[string]string{
		"go.mod":    "module example.com/x\n\ngo 1.22\n",
		"x.go":      "package x\n\nfunc Add(a, b int) int { return a + b }\n",
		"README.md": "# x\n",
	} {
		if err := os.WriteFile(filepath.Join(w.project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cas, err := filepath.Abs("../../examples/cassettes/parseconfig.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	w.cassette = cas
	w.policyFile = filepath.Join(w.tmp, "policy.yaml")
	if err := os.WriteFile(w.policyFile, policy.DefaultYAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Commands such as attach start the project's kernel (a local
		// process: FLUFFY_L1=none); stop it.
		_, _, _ = w.run([]string{"kernel", "stop", "--project", w.project}, false)
	})
	return w
}

// fresh returns a path in the walk's temp dir that does not exist yet.
func (w *usageWalk) fresh(what string) string {
	w.n++
	return filepath.Join(w.tmp, fmt.Sprintf("%s-%d", what, w.n))
}

func (w *usageWalk) emptyDir() string {
	d := w.fresh("dir")
	if err := os.MkdirAll(d, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return d
}

// substitute replaces the placeholders of a documented line with safe
// values: nothing outside the walk's temp dirs, no network, no L1 container.
func (w *usageWalk) substitute(words []string) []string {
	out := make([]string, 0, len(words))
	for i, a := range words {
		prev := ""
		if i > 0 {
			prev = out[i-1]
		}
		out = append(out, w.placeholder(prev, a))
	}
	return out
}

func (w *usageWalk) placeholder(prev, a string) string {
	if strings.Contains(a, "|") && !strings.ContainsAny(a, "{\"' ") {
		// An alternative (docker|none): the one that needs no engine or
		// network when there is one.
		alts := strings.Split(a, "|")
		for _, x := range alts {
			if x == "none" {
				return x
			}
		}
		return alts[0]
	}
	switch a {
	case "FILE":
		switch prev {
		case "-o", "--json", "--junit", "--record", "--file", "--log":
			return w.fresh("out")
		case "--cassette":
			return w.cassette
		}
		return w.policyFile
	case "PATH":
		if prev == "--module" {
			return "example.com/walk"
		}
		return w.emptyDir()
	case "DIR":
		switch prev {
		case "--project":
			return w.project
		case "--dir", "--db":
			return w.fresh("new")
		}
		return w.emptyDir()
	case "NAME":
		switch prev {
		case "--model":
			return "m1"
		case "--caller":
			return "tool-fs"
		}
		return "no-such-plugin"
	case "NAME[@VERSION]":
		return "no-such-plugin@0.1.0"
	case "TAG":
		return "trusted_write"
	case "KEY":
		return "model"
	case "VALUE":
		return "m1"
	case "ID":
		return "no-such-session"
	case "SEQ":
		return "0"
	case "T":
		switch prev {
		case "--sandbox":
			return "code-executor"
		case "--tag":
			return "core_plugin"
		}
		return "2h"
	case "N":
		return "5"
	case "D":
		return "1s"
	case "JSON", "ARGS_JSON":
		return "{}"
	case "PHRASE":
		return "phrase"
	case "PLUGIN":
		return "tool-fs"
	case "TOOL":
		return "fs.read"
	case "S":
		switch prev {
		case "--syscall":
			return "fs.read"
		case "--state":
			return "idle"
		}
		return "none"
	case "P":
		switch prev {
		case "--path":
			return "x.go"
		case "--profile":
			return "core"
		}
		return "replay"
	case "P,Q":
		return "core,tool"
	case "H":
		return "example.com"
	case "K":
		return "tool"
	case "M":
		return "strict"
	case "COMMAND":
		return "plugin"
	case "SUBCOMMAND":
		// The first subcommand of the command before it.
		if c := commandTree().sub(prev); c != nil && len(c.subNames()) > 0 {
			return c.subNames()[0]
		}
	case "USD":
		return "1"
	case "URL":
		return "http://127.0.0.1:9/mcp"
	case "10m":
		if prev == "--idle" {
			return "2s" // a foreground kernel exits by itself
		}
	}
	return a
}

// run runs fluffy with args in the project, with a fresh home and no
// provider keys; the interactive shell gets a terminal (script(1)) and
// leaves at once.
func (w *usageWalk) run(args []string, tty bool) (code int, stderr string, timedOut bool) {
	ctx, cancel := context.WithTimeout(context.Background(), walkTimeout)
	defer cancel()
	var cmd *exec.Cmd
	if tty || isREPLForm(args) {
		quoted := []string{shellQuote(w.bin)}
		for _, a := range args {
			quoted = append(quoted, shellQuote(a))
		}
		cmd = exec.CommandContext(ctx, "script", "-qec", strings.Join(quoted, " "), "/dev/null")
		in := w.fresh("stdin")
		if err := os.WriteFile(in, []byte("\n\n\n\n/exit\n"), 0o600); err != nil {
			w.t.Fatal(err)
		}
		f, err := os.Open(in)
		if err != nil {
			w.t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	} else {
		cmd = exec.CommandContext(ctx, w.bin, args...)
	}
	cmd.Dir = w.project
	cmd.Env = w.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Still running at the deadline (a foreground kernel): asked to stop
	// as a user's Ctrl-C would, killed if it does not.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	// A file, not a pipe: a kernel the command starts outlives it, and a
	// pipe it inherited would keep Wait waiting.
	out, err := os.Create(w.fresh("out"))
	if err != nil {
		w.t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out // script(1) puts both on its stdout
	err = cmd.Run()
	text, _ := os.ReadFile(out.Name())
	if ctx.Err() != nil {
		return -1, string(text), true
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(text), false
	} else if err != nil {
		w.t.Fatalf("fluffy %q: %v", args, err)
	}
	return 0, string(text), false
}

func (w *usageWalk) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FLUFFY_") || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "FLUFFY_HOME="+w.home, "FLUFFY_L1=none")
}

// isREPLForm reports whether args start the interactive shell: no command
// and no task.
func isREPLForm(args []string) bool {
	if len(args) == 0 {
		return true
	}
	root := commandTree()
	if root.sub(args[0]) != nil {
		return false
	}
	fs, _ := root.declare(docEnv(), "fluffy")
	return parseFlags(fs, args) == nil && fs.NArg() == 0
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// helpUsageLines returns every synopsis --help prints (each alternative,
// every optional part in and out, flags also in front), and every
// `fluffy …` the help texts quote.
func helpUsageLines(t *testing.T) []usageLine {
	root := commandTree()
	var lines []usageLine
	eachCmd(root, func(path []*cmd) {
		if path[len(path)-1].hidden {
			return
		}
		var b bytes.Buffer
		if err := printHelp(&b, docEnv(), root, path); err != nil {
			t.Fatal(err)
		}
		where := strings.TrimSpace("fluffy help " + pathName(path))
		text := b.String()
		for _, syn := range helpSynopses(text) {
			for _, alt := range strings.Split(syn, " | ") {
				words := strings.Fields(alt)
				if len(words) > 0 && words[0] == "fluffy" {
					words = words[1:]
				}
				if slices.Contains(words, "<command>") || (slices.Contains(words, "SUBCOMMAND") && !strings.HasPrefix(alt, "help")) {
					continue // a command group: each subcommand has its own line
				}
				for _, form := range expandOptional(words) {
					lines = append(lines, usageLine{where, form}, usageLine{where + " (flags first)", flagsFirst(form)})
				}
			}
		}
		lines = append(lines, quotedCommands(where, text)...)
	})
	return lines
}

var (
	usageRe     = regexp.MustCompile(`(?m)^(?:Usage:| {6}) +fluffy(.*?)(?:   .*)?$`)
	trailingSep = regexp.MustCompile(`\s{2,}.*$`)
)

// synopses returns the "Usage: fluffy …" lines of a help text (fluffy's own
// has continuation lines, each a synopsis followed by what it does).
func helpSynopses(text string) []string {
	var out []string
	for _, m := range usageRe.FindAllStringSubmatch(text, -1) {
		s := strings.TrimSpace(trailingSep.ReplaceAllString(strings.TrimLeft(m[1], " "), ""))
		out = append(out, strings.TrimSpace("fluffy "+s))
	}
	return out
}

// descriptive words of a synopsis name arguments, they are not ones
// ([flags], [arguments], [init's flags]).
var descriptive = map[string]bool{"flags": true, "arguments": true, "init's": true}

// expandOptional returns words with every [optional] part included (each
// "..." once) and with none.
func expandOptional(words []string) [][]string {
	var ws []string
	for _, w := range words {
		ws = append(ws, strings.Trim(w, `"`))
	}
	var full, min []string
	depth := 0
	for _, w := range ws {
		if w == "NAME[@VERSION]" {
			full, min = append(full, w), append(min, w)
			continue
		}
		open := len(w) - len(strings.TrimLeft(w, "["))
		w = strings.TrimLeft(w, "[")
		closeCount := 0
		if w != "..." { // "..." alone is a task ("...")
			w = strings.TrimSuffix(w, "...")
		}
		for strings.HasSuffix(w, "]") {
			w = strings.TrimSuffix(w, "]")
			closeCount++
		}
		depth += open
		if w != "" && !descriptive[w] {
			full = append(full, w)
			if depth == 0 {
				min = append(min, w)
			}
		}
		depth -= closeCount
	}
	if strings.Join(full, " ") == strings.Join(min, " ") {
		return [][]string{full}
	}
	return [][]string{full, min}
}

// flagsFirst moves the flags (with their values) of a synopsis in front of
// its positional arguments, after the command and subcommand names.
func flagsFirst(words []string) []string {
	path, _ := walk(commandTree(), words)
	n := len(path) - 1
	var flags, pos []string
	for i := n; i < len(words); i++ {
		if words[i] == "--" {
			// What follows `--` is positional and stays last, in order.
			pos = append(pos, words[i:]...)
			break
		}
		if strings.HasPrefix(words[i], "-") {
			flags = append(flags, words[i])
			if i+1 < len(words) && isValuePlaceholder(words[i+1]) {
				i++
				flags = append(flags, words[i])
			}
			continue
		}
		pos = append(pos, words[i])
	}
	return append(append(append([]string{}, words[:n]...), flags...), pos...)
}

// isValuePlaceholder: the word after a flag is its value (FILE, docker|none,
// 10m, export.jsonl, a,b), not a positional.
func isValuePlaceholder(w string) bool {
	return w != "" && !strings.HasPrefix(w, "-") && (strings.ToUpper(w) == w || strings.Contains(w, "|") ||
		strings.ContainsAny(w, ".,0123456789"))
}

var quotedCmdRe = regexp.MustCompile("`((?:\\./|[\\w./-]*/)?fluffy(?: [^`]*)?)`")

// quotedCommands returns the `fluffy …` spans of prose, a span naming only
// a command or subcommand (a reference to it, whose synopsis is walked
// anyway) left out.
func quotedCommands(where, text string) []usageLine {
	text = strings.ReplaceAll(text, "\n", " ")
	var out []usageLine
	for _, m := range quotedCmdRe.FindAllStringSubmatch(text, -1) {
		if l, ok := commandLine(where, m[1]); ok {
			out = append(out, l)
		}
	}
	return out
}

// commandLine parses a shell line into fluffy's arguments: env assignments
// and a "$ " prompt before it, a comment, pipe or redirection after it are
// left out. ok is false when the line does not run fluffy or only names a
// command.
func commandLine(where, line string) (usageLine, bool) {
	words := shellWords(line)
	for len(words) > 0 && (words[0] == "$" || regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0])) {
		words = words[1:]
	}
	if len(words) == 0 || (words[0] != "fluffy" && !strings.HasSuffix(words[0], "/fluffy")) {
		return usageLine{}, false
	}
	words = words[1:]
	if _, rest := walk(commandTree(), words); len(rest) == 0 && len(words) > 0 {
		return usageLine{}, false
	}
	// A line written in full: its [optional] parts, if any, included.
	return usageLine{where, expandOptional(words)[0]}, true
}

// shellWords splits a shell command line into words (quotes removed),
// stopping at an unquoted comment, pipe, list operator or redirection.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case !inWord && (c == '#' || c == '|' || c == ';' || c == '>' || c == '<' || c == '&'):
			flush()
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// docUsageLines returns the fluffy command lines of README.md and
// docs/*.md: each line of a code block that runs fluffy, and each `fluffy …`
// span of the prose.
func docUsageLines(t *testing.T) []usageLine {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var lines []usageLine
	for _, f := range files {
		if filepath.Base(f) == "decisions.md" {
			continue // the decision log records what was, not what is
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		var prose strings.Builder
		inCode := false
		for i, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
				continue
			}
			if inCode {
				if ul, ok := commandLine(fmt.Sprintf("%s:%d", name, i+1), strings.TrimSpace(l)); ok {
					lines = append(lines, ul)
				}
				continue
			}
			prose.WriteString(l + "\n")
		}
		lines = append(lines, quotedCommands(name, prose.String())...)
	}
	return lines
}
