package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

func call(t *testing.T, c tool.Client, name, args string) tool.Result {
	t.Helper()
	r, err := c.Execute(context.Background(), tool.Call{ID: "c1", OperationID: "op1", Tool: name, Args: json.RawMessage(args)}, nil)
	if err != nil {
		t.Fatalf("%s: transport error %v", name, err)
	}
	return r
}

// fixtureFiles is a small project exercising ignore rules, binaries and
// line edge cases.
var fixtureFiles = map[string]string{
	".gitignore":           "# build output\n*.log\n/build/\n!keep.log\nvendor/\ndocs/*.tmp   \n",
	"main.go":              "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
	"util/util.go":         "package util\n\n// Hello says hello.\nfunc Hello() string { return \"Hello\" }\n",
	"util/.gitignore":      "generated.go\n!important.log\n",
	"util/generated.go":    "package util // hello generated\n",
	"util/important.log":   "hello from a re-included log\n",
	"util/deep/x.go":       "package deep\nvar hello = 1\n",
	"app.log":              "hello log\n",
	"keep.log":             "hello kept\n",
	"build/out.txt":        "hello build\n",
	"sub/build/out.txt":    "hello sub build (not anchored: kept)\n",
	"vendor/v.go":          "hello vendor\n",
	"docs/a.tmp":           "hello tmp\n",
	"docs/readme.md":       "Hello docs\r\nsecond hello line\r\n",
	"crlf.txt":             "no match here\n",
	"noeol.txt":            "last line hello",
	"long.txt":             strings.Repeat("x", 1000) + "hello" + strings.Repeat("é", 500) + "\n",
	".git/config":          "hello git internals\n",
	".git/info/exclude":    "excluded-by-info.txt\n",
	"excluded-by-info.txt": "hello excluded\n",
}

func newEnv(t *testing.T) (plugintest.Env, string) {
	env := plugintest.NewEnv(t, fixtureFiles)
	os.WriteFile(filepath.Join(env.Workspace, "bin.dat"), []byte("hello\x00binary"), 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("hello secret\n"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(env.Workspace, "leak.txt"))
	os.Symlink(outside, filepath.Join(env.Workspace, "leakdir"))
	return env, outside
}

func grepOut(t testing.TB, r tool.Result) grepResult {
	t.Helper()
	if !r.OK {
		t.Fatalf("unexpected error: %v", r.Err)
	}
	var g grepResult
	if err := json.Unmarshal(r.Output, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGrep(t *testing.T) {
	env, _ := newEnv(t)
	long := "long.txt:1:" + strings.Repeat("x", 400) + " …[line truncated, 2005 bytes]"
	cases := []struct {
		name, args string
		want       []string // exact matches, in order
		truncated  bool
	}{
		{"literal honours ignores", `{"pattern":"hello"}`, []string{
			"docs/readme.md:2:second hello line", "keep.log:1:hello kept", "long.txt:1:" + long[len("long.txt:1:"):], "main.go:4:\tprintln(\"hello\")", "noeol.txt:1:last line hello",
			"sub/build/out.txt:1:hello sub build (not anchored: kept)", "util/deep/x.go:2:var hello = 1", "util/important.log:1:hello from a re-included log", "util/util.go:3:// Hello says hello."}, false},
		{"ignore case, CRLF trimmed", `{"pattern":"hello","path":"docs","ignore_case":true}`, []string{"docs/readme.md:1:Hello docs", "docs/readme.md:2:second hello line"}, false},
		{"regexp anchors per line", `{"pattern":"^func \\w+\\(","path":"."}`, []string{"main.go:3:func main() {", "util/util.go:4:func Hello() string { return \"Hello\" }"}, false},
		{"glob filter", `{"pattern":"hello","glob":"*.go","ignore_case":true}`, []string{"main.go:4:\tprintln(\"hello\")", "util/deep/x.go:2:var hello = 1", "util/util.go:3:// Hello says hello.", "util/util.go:4:func Hello() string { return \"Hello\" }"}, false},
		{"negated glob", `{"pattern":"hello","glob":"!*.go","path":"util"}`, []string{"util/important.log:1:hello from a re-included log"}, false},
		{"explicit ignored file is searched", `{"pattern":"hello","path":"util/generated.go"}`, []string{"util/generated.go:1:package util // hello generated"}, false},
		{"under the cap", `{"pattern":"hello","max_results":2,"path":"keep.log"}`, []string{"keep.log:1:hello kept"}, false},
		{"exactly at the cap", `{"pattern":"hello","max_results":1,"path":"keep.log"}`, []string{"keep.log:1:hello kept"}, false},
		{"cap and marker", `{"pattern":"hello","max_results":2}`, []string{"docs/readme.md:2:second hello line", "keep.log:1:hello kept"}, true},
		{"no match across lines", `{"pattern":"main\\(\\) \\{\\s+println"}`, []string{}, false},
		{"end anchor", `{"pattern":"hello$","path":"noeol.txt"}`, []string{"noeol.txt:1:last line hello"}, false},
		{"empty-match pattern reports real lines only", `{"pattern":"$","path":"util/deep"}`, []string{"util/deep/x.go:1:package deep", "util/deep/x.go:2:var hello = 1"}, false},
	}
	for _, v := range []int{1, 2} {
		c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), v, env)
		for _, tc := range cases {
			g := grepOut(t, call(t, c, "search.grep", tc.args))
			if !slices.Equal(g.Matches, tc.want) {
				t.Errorf("v%d %s:\n got %q\nwant %q", v, tc.name, g.Matches, tc.want)
			}
			if g.Truncated != tc.truncated || (tc.truncated && !strings.Contains(g.Note, "max_results")) || g.Count != len(g.Matches) {
				t.Errorf("v%d %s: truncated=%v note=%q count=%d", v, tc.name, g.Truncated, g.Note, g.Count)
			}
		}
	}
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	if g := grepOut(t, call(t, c, "search.grep", `{"pattern":"binary"}`)); len(g.Matches) != 0 || g.BinarySkipped != 1 {
		t.Errorf("binary file: %+v", g)
	}
}

func TestGrepErrors(t *testing.T) {
	env, _ := newEnv(t)
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	for _, tc := range []struct{ args, code string }{
		{`{"pattern":"a(b"}`, "SEARCH_BAD_PATTERN"},
		{`{"pattern":"(?<=x)y"}`, "SEARCH_BAD_PATTERN"},
		{`{"pattern":"x","glob":"a//b"}`, "SEARCH_BAD_GLOB"},
		{`{"pattern":"x","path":"../etc"}`, "FS_PATH_ESCAPES"},
		{`{"pattern":"x","path":"/etc"}`, "FS_PATH_ABSOLUTE"},
		{`{"pattern":"x","path":"nope"}`, "FS_NOT_FOUND"},
		{`{"pattern":"x","path":"leak.txt"}`, "SEARCH_SYMLINK"},
		{`{"pattern":"x","path":"leakdir/secret.txt"}`, "FS_PATH_ESCAPES"},
		{`{"pattern":"x","extra":1}`, "TOOL_ARGS_INVALID"},
		{`{"pattern":"` + strings.Repeat("a", 5000) + `"}`, "SEARCH_BAD_PATTERN"},
	} {
		r := call(t, c, "search.grep", tc.args)
		if r.OK || r.Err == nil || r.Err.Code != tc.code {
			t.Errorf("%s: want %s, got ok=%v err=%v", tc.args[:min(len(tc.args), 60)], tc.code, r.OK, r.Err)
		}
	}
	// Symlinks are never followed: the secret outside is not found.
	if g := grepOut(t, call(t, c, "search.grep", `{"pattern":"secret"}`)); len(g.Matches) != 0 {
		t.Fatalf("followed a symlink out of the project: %q", g.Matches)
	}
}

func globOut(t testing.TB, r tool.Result) globResult {
	t.Helper()
	if !r.OK {
		t.Fatalf("unexpected error: %v", r.Err)
	}
	var g globResult
	if err := json.Unmarshal(r.Output, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGlob(t *testing.T) {
	env, _ := newEnv(t)
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	cases := []struct {
		args      string
		want      []string
		truncated bool
	}{
		{`{"pattern":"*.go"}`, []string{"main.go", "util/deep/x.go", "util/util.go"}, false},
		{`{"pattern":"*.go","path":"util"}`, []string{"util/deep/x.go", "util/util.go"}, false},
		{`{"pattern":"/*.go","path":"util"}`, []string{"util/util.go"}, false},
		{`{"pattern":"**/deep/*.go"}`, []string{"util/deep/x.go"}, false},
		{`{"pattern":"build/"}`, []string{"sub/build/"}, false},
		{`{"pattern":"*.log"}`, []string{"keep.log", "util/important.log"}, false},
		{`{"pattern":"*","max_results":3}`, []string{".gitignore", "bin.dat", "crlf.txt"}, true},
		{`{"pattern":"nothing-*"}`, []string{}, false},
	}
	for _, tc := range cases {
		g := globOut(t, call(t, c, "search.glob", tc.args))
		if !slices.Equal(g.Paths, tc.want) || g.Truncated != tc.truncated {
			t.Errorf("%s:\n got %q truncated=%v\nwant %q truncated=%v", tc.args, g.Paths, g.Truncated, tc.want, tc.truncated)
		}
	}
	for _, tc := range []struct{ args, code string }{
		{`{"pattern":"#x"}`, "SEARCH_BAD_GLOB"},
		{`{"pattern":"*.go","path":"main.go"}`, "FS_NOT_DIR"},
		{`{"pattern":"*","path":"leakdir"}`, "SEARCH_SYMLINK"},
	} {
		r := call(t, c, "search.glob", tc.args)
		if r.OK || r.Err == nil || r.Err.Code != tc.code {
			t.Errorf("%s: want %s, got ok=%v err=%v", tc.args, tc.code, r.OK, r.Err)
		}
	}
}

// TestIgnoreAgreesWithGit lists a tree with nested .gitignore files, negations,
// anchored and directory patterns through search.glob and compares it with
// git's own answer (`git ls-files --others --exclude-standard`).
func TestIgnoreAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	env, _ := newEnv(t)
	ws := env.Workspace
	// More shapes than the shared fixture: a re-included file inside an
	// ignored directory (git cannot re-include it), ** patterns, escapes.
	extra := map[string]string{
		"a/.gitignore": "**/tmp\n!/keep/\n*.o\n\\#hash\n",
		"a/tmp/x":      "", "a/b/tmp/y": "", "a/keep/z.o": "", "a/keep/w": "", "a/x.o": "", "a/#hash": "", "a/plain": "",
		"c/.gitignore": "*\n!*.txt\n!*/\n",
		"c/d/e.txt":    "", "c/d/e.bin": "", "c/f.txt": "",
		"g/.gitignore":           "ignored-dir/\n!ignored-dir/back.txt\n",
		"g/ignored-dir/back.txt": "",
	}
	for p, body := range extra {
		full := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(body), 0o644)
	}
	os.RemoveAll(filepath.Join(ws, ".git"))
	os.Remove(filepath.Join(ws, "leak.txt"))
	os.Remove(filepath.Join(ws, "leakdir"))
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	os.WriteFile(filepath.Join(ws, ".git", "info", "exclude"), []byte("excluded-by-info.txt\n"), 0o644)
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(run("ls-files", "--others", "--exclude-standard")), "\n") {
		want = append(want, strings.Trim(l, `"`))
	}
	sort.Strings(want)
	c := plugintest.InProcessTool(t, newToolSet(hclog.NewNullLogger()), 2, env)
	g := globOut(t, call(t, c, "search.glob", `{"pattern":"**","max_results":10000}`))
	got := slices.Clone(g.Paths)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("search.glob and git disagree:\n ours %q\n git  %q\n only ours %q\n only git %q", got, want, diff(got, want), diff(want, got))
	}
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestToolSearchBinaryNegotiates(t *testing.T) {
	bin := plugintest.Build(t, ".")
	env, _ := newEnv(t)
	b := plugintest.StartTool(t, bin, env)
	g := grepOut(t, call(t, b.Tool, "search.grep", `{"pattern":"hello kept"}`))
	if fmt.Sprint(g.Matches) != "[keep.log:1:hello kept]" {
		t.Fatalf("grep via binary: %+v", g)
	}
}
