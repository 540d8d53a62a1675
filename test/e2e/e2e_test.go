package e2e

import (
	"bufio"
	"encoding/json"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
	"github.com/fluffy-waffle/fluffy/test/harness"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// project is a small project in its community's usual layout and the
// change a scripted model makes to it, test-first.
type project struct {
	name  string
	needs string // the host command its tests run with
	files map[string]string
	task  string
	// before: turns before plan.complete (tools any state allows).
	before [][]harness.Call
	// turns after plan.complete; each turn's calls, in order.
	turns [][]harness.Call
	// refused: the index of the first call (over all turns) that the
	// kernel must refuse, or -1.
	refused int
	want    map[string]string // files the merge must leave in the project
	hostRun []string
	hostOK  string
}

const goWordfreq = `// Package wordfreq counts words.
package wordfreq

import (
	"strings"

	"example.com/wordfreq/internal/norm"
)

// Count returns how often each word occurs in s.
func Count(s string) map[string]int {
	out := map[string]int{}
	for _, w := range strings.Fields(s) {
		out[norm.Word(w)]++
	}
	return out
}
`

const goWordfreqFixed = `// Package wordfreq counts words.
package wordfreq

import (
	"strings"

	"example.com/wordfreq/internal/norm"
)

// Count returns how often each word occurs in s, ignoring case.
func Count(s string) map[string]int {
	out := map[string]int{}
	for _, w := range strings.Fields(s) {
		out[strings.ToLower(norm.Word(w))]++
	}
	return out
}
`

const goCaseTest = `package wordfreq

import "testing"

func TestCountIgnoresCase(t *testing.T) {
	if got := Count("Go go GO")["go"]; got != 3 {
		t.Fatalf("Count(\"Go go GO\")[\"go\"] = %d, want 3", got)
	}
}
`

func projects() []project {
	return []project{{
		// The Go convention: the package at the module root, its tests
		// beside it, a helper package under internal/. The first write is
		// source before any red run, at the root: refused.
		name: "go", needs: "go",
		files: map[string]string{
			"go.mod":                "module example.com/wordfreq\n\ngo 1.22\n",
			"wordfreq.go":           goWordfreq,
			"wordfreq_test.go":      "package wordfreq\n\nimport \"testing\"\n\nfunc TestCount(t *testing.T) {\n\tif got := Count(\"a b a\")[\"a\"]; got != 2 {\n\t\tt.Fatalf(\"got %d\", got)\n\t}\n}\n",
			"internal/norm/norm.go": "// Package norm normalises words.\npackage norm\n\nimport \"strings\"\n\n// Word trims punctuation around w.\nfunc Word(w string) string { return strings.Trim(w, \".,;:!?\") }\n",
		},
		task: "make Count ignore case",
		turns: [][]harness.Call{
			{harness.Write("wordfreq.go", goWordfreqFixed)},
			{harness.Write("case_test.go", goCaseTest), harness.TestRun()},
			{harness.Write("wordfreq.go", goWordfreqFixed), harness.TestRun()},
		},
		refused: 0,
		want:    map[string]string{"wordfreq.go": goWordfreqFixed, "case_test.go": goCaseTest},
		hostRun: []string{"go", "test", "./..."}, hostOK: "ok",
	}, {
		// A Python package beside tests/, as pytest's docs lay it out.
		name: "python", needs: "pytest-3",
		files: map[string]string{
			"pyproject.toml":       "[project]\nname = \"slugs\"\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\npythonpath = [\".\"]\n",
			"slugs/__init__.py":    "from .core import slug\n",
			"slugs/core.py":        "def slug(s):\n    return s.lower().replace(\" \", \"-\")\n",
			"tests/test_core.py":   "from slugs import slug\n\n\ndef test_spaces():\n    assert slug(\"A b\") == \"a-b\"\n",
			"tests/__init__.py":    "",
			"slugs/py.typed":       "",
			".gitignore":           "__pycache__/\n.pytest_cache/\n",
			"tests/conftest.py":    "",
			"slugs/_version.py":    "VERSION = \"0.1.0\"\n",
			"tests/data/README.md": "fixtures\n",
		},
		task: "strip punctuation in slug",
		turns: [][]harness.Call{
			{harness.Write("tests/test_punct.py", "from slugs import slug\n\n\ndef test_punctuation():\n    assert slug(\"Hi, there!\") == \"hi-there\"\n"), harness.TestRun()},
			{harness.Write("slugs/core.py", "import re\n\n\ndef slug(s):\n    s = re.sub(r\"[^\\w\\s-]\", \"\", s)\n    return s.lower().replace(\" \", \"-\")\n"), harness.TestRun()},
		},
		refused: -1,
		want:    map[string]string{"slugs/core.py": "import re\n\n\ndef slug(s):\n    s = re.sub(r\"[^\\w\\s-]\", \"\", s)\n    return s.lower().replace(\" \", \"-\")\n"},
		hostRun: []string{"pytest-3", "-q", "-p", "no:cacheprovider"}, hostOK: "2 passed",
	}, {
		// A Node package: code in lib/, a test beside it (*.test.js), run
		// by node's own runner.
		name: "node", needs: "node",
		files: map[string]string{
			"package.json":       "{\n  \"name\": \"clampjs\",\n  \"version\": \"1.0.0\",\n  \"main\": \"lib/clamp.js\",\n  \"scripts\": { \"test\": \"node --test\" }\n}\n",
			"lib/clamp.js":       "function clamp(x, lo, hi) { return Math.min(Math.max(x, lo), hi); }\nmodule.exports = { clamp };\n",
			"lib/clamp.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { clamp } = require('./clamp');\ntest('clamps', () => { assert.strictEqual(clamp(5, 0, 3), 3); });\n",
			".gitignore":         "node_modules/\n",
			"README.md":          "# clampjs\n",
			"lib/internal/id.js": "module.exports = (x) => x;\n",
		},
		task: "add wrap to clampjs",
		turns: [][]harness.Call{
			{harness.Write("lib/wrap.test.js", "const test = require('node:test');\nconst assert = require('node:assert');\nconst { wrap } = require('./wrap');\ntest('wraps', () => { assert.strictEqual(wrap(7, 0, 5), 2); });\n"), harness.TestRun()},
			{harness.Write("lib/wrap.js", "function wrap(x, lo, hi) { const n = hi - lo; return ((((x - lo) % n) + n) % n) + lo; }\nmodule.exports = { wrap };\n"), harness.TestRun()},
		},
		refused: -1,
		want:    map[string]string{"lib/wrap.js": "function wrap(x, lo, hi) { const n = hi - lo; return ((((x - lo) % n) + n) % n) + lo; }\nmodule.exports = { wrap };\n"},
		hostRun: []string{"node", "--test"}, hostOK: "# pass 2",
	}, {
		// A Rust crate: the library in src/, integration tests in tests/.
		name: "rust", needs: "cargo",
		files: map[string]string{
			"Cargo.toml":      "[package]\nname = \"ranges\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
			"src/lib.rs":      "pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    x.max(lo).min(hi)\n}\n",
			"tests/clamp.rs":  "#[test]\nfn clamps() {\n    assert_eq!(ranges::clamp(5, 0, 3), 3);\n}\n",
			".gitignore":      "/target\n",
			"benches/.keep":   "",
			"examples/use.rs": "fn main() {\n    println!(\"{}\", ranges::clamp(1, 0, 2));\n}\n",
		},
		task: "add span to ranges",
		turns: [][]harness.Call{
			{harness.Write("tests/span.rs", "#[test]\nfn spans() {\n    assert_eq!(ranges::span(2, 7), 5);\n}\n"), harness.TestRun()},
			{harness.Write("src/lib.rs", "pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    x.max(lo).min(hi)\n}\n\npub fn span(lo: i32, hi: i32) -> i32 {\n    hi - lo\n}\n"), harness.TestRun()},
		},
		refused: -1,
		want:    map[string]string{"src/lib.rs": "pub fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    x.max(lo).min(hi)\n}\n\npub fn span(lo: i32, hi: i32) -> i32 {\n    hi - lo\n}\n"},
		hostRun: []string{"cargo", "test", "--offline"}, hostOK: "test result: ok. 1 passed",
	}}
}

// events are a scripted model's turns: plan.complete, the project's turns,
// then a closing answer.
func (p project) events() [][]provider.Event {
	return harness.Turns(append(append(slices.Clone(p.before), []harness.Call{harness.Plan()}), p.turns...)...)
}

func (p project) cassette(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	w := cassette.NewWriter(&b)
	w.CheckRequests = false
	for _, evs := range p.events() {
		if err := w.Add(provider.ChatRequest{}, evs); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// newProject writes p into a fresh git repository and returns the user
// working in it on home.
func newProject(t *testing.T, fluffy, home string, p project, extraEnv ...string) user {
	t.Helper()
	env := append(os.Environ(), "FLUFFY_HOME="+home)
	u := user{harness.User{T: t, Fluffy: fluffy, Dir: t.TempDir(), Env: append(env, extraEnv...)}}
	u.InitRepo(p.files)
	t.Cleanup(func() { _, _, _ = u.Run("kernel", "stop") })
	return u
}

// user is a person at a shell in one project and one home.
type user struct{ harness.User }

// useCassette writes p's scripted turns to a cassette in the project's
// .fluffy/ and points provider-replay at it with `fluffy config set`, as
// a user would.
func (u user) useCassette(p project) {
	u.T.Helper()
	cas := filepath.Join(u.Dir, ".fluffy", "cassette.jsonl")
	if err := os.MkdirAll(filepath.Dir(cas), 0o755); err != nil {
		u.T.Fatal(err)
	}
	if err := os.WriteFile(cas, []byte(p.cassette(u.T)), 0o600); err != nil {
		u.T.Fatal(err)
	}
	if _, stderr, code := u.Run("config", "set", "--project", "providers.replay.cassette", cas); code != 0 {
		u.T.Fatalf("config set: exit %d\n%s", code, stderr)
	}
}

// result is what a --json task printed.
type result struct {
	code     int
	status   string
	commit   string
	tools    []string // name=test_status or name!ERROR_CODE, in order
	stderr   string
	lastLine string
}

func (u user) task(args ...string) result {
	u.T.Helper()
	out, stderr, code := u.Run(args...)
	r := result{code: code, stderr: stderr}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Tool *struct {
				Name       string `json:"name"`
				TestStatus string `json:"test_status"`
				Error      *struct {
					Code string `json:"code"`
					What string `json:"what"`
				} `json:"error"`
			} `json:"tool"`
			Done *struct {
				Status string `json:"status"`
				Commit string `json:"commit"`
			} `json:"done"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			u.T.Fatalf("stdout line is not a JSON event: %q", sc.Text())
		}
		r.lastLine = sc.Text()
		if ev.Type == "tool_result" && ev.Tool != nil {
			s := ev.Tool.Name + "=" + ev.Tool.TestStatus
			if ev.Tool.Error != nil {
				s = ev.Tool.Name + "!" + ev.Tool.Error.Code
			}
			r.tools = append(r.tools, s)
		}
		if ev.Done != nil {
			r.status, r.commit = ev.Done.Status, ev.Done.Commit
		}
	}
	return r
}

// check asserts a task of p ended merged and committed, test-first, and
// that the project's own tests pass on the host afterwards.
func check(t *testing.T, u user, p project, r result) {
	t.Helper()
	if r.code != 0 || r.status != "done" {
		t.Fatalf("%s: exit %d, status %q\ntools: %q\nlast event: %.800s\nstderr:\n%s", p.name, r.code, r.status, r.tools, r.lastLine, r.stderr)
	}
	tl := strings.Join(r.tools, " ")
	red, green := strings.Index(tl, "test.run=red"), strings.LastIndex(tl, "test.run=green")
	if red < 0 || green < red {
		t.Fatalf("%s: tool results %s: want a red then a green test run", p.name, tl)
	}
	writes := 0
	for _, s := range r.tools {
		if strings.HasPrefix(s, "fs.write") {
			if refused := strings.HasPrefix(s, "fs.write!"); refused != (writes == p.refused) {
				t.Fatalf("%s: write %d result %q (want refused only at %d); all: %q", p.name, writes, s, p.refused, r.tools)
			}
			writes++
		}
	}
	for path, want := range p.want {
		if got, _ := os.ReadFile(filepath.Join(u.Dir, path)); string(got) != want {
			t.Fatalf("%s: %s was not merged:\n%s", p.name, path, got)
		}
	}
	log := strings.TrimSpace(u.Git("log", "--format=%H %s"))
	if n := len(strings.Split(log, "\n")); n != 2 || r.commit == "" || !strings.HasPrefix(log, r.commit) {
		t.Fatalf("%s: want one new commit %q on top of the first, git log:\n%s", p.name, r.commit, log)
	}
	cmd := exec.Command(p.hostRun[0], p.hostRun[1:]...)
	cmd.Dir = u.Dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), p.hostOK) {
		t.Fatalf("%s: the merged project's tests on the host: %v\n%s", p.name, err, out)
	}
}

// TestCommunityLayouts changes a Go module (code at the root), a Python
// package, a Node package and a Rust crate test-first with the default
// policy, all four tasks at once on one $FLUFFY_HOME, the provider named
// on the command line (`--provider replay`, its cassette in the project's
// config) as a user types it.
func TestCommunityLayouts(t *testing.T) {
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-replay")
	home := harness.ShortHome(t, "fh")
	for _, p := range projects() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel() // -parallel (GOMAXPROCS) tasks at once on the one home
			if _, err := exec.LookPath(p.needs); err != nil {
				t.Fatalf("the %s project needs %s on the host (.ci/run installs it)", p.name, p.needs)
			}
			u := newProject(t, fluffy, home, p)
			u.useCassette(p)
			check(t, u, p, u.task("--provider", "replay", "--yes", "--json", p.task))
		})
	}
}

// TestGoModuleWithOpenAI is the Go task with provider-openai talking to a
// local fake of the Chat Completions API (byte for byte as the service
// streams), selected by --provider and --model with the key and base URL
// in the environment. The kernel runs as a local process (--l1 none): the
// fake listens on the host's loopback, which an L1 container cannot reach.
func TestGoModuleWithOpenAI(t *testing.T) {
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-replay")
	home := harness.ShortHome(t, "fh")
	p := projects()[0]
	srv := providertest.New()
	t.Cleanup(srv.Close)
	srv.Play(providertest.OpenAITurns(p.events())...)
	u := newProject(t, fluffy, home, p, "OPENAI_API_KEY=sk-e2e-not-a-real-key", "OPENAI_BASE_URL="+srv.URL()+"/v1")
	r := u.task("--provider", "openai", "--model", "gpt-4.1", "--l1", "none", "--yes", "--json", p.task)
	check(t, u, p, r)
	reqs := srv.Requests()
	// The merge after the green run ends the task: the closing answer is
	// never asked for.
	if len(reqs) != len(p.events())-1 {
		t.Fatalf("the fake saw %d requests for %d scripted turns", len(reqs), len(p.events()))
	}
	if !strings.Contains(string(reqs[0].Body), `"model":"gpt-4.1"`) {
		t.Fatalf("the first request does not ask for --model gpt-4.1:\n%.600s", reqs[0].Body)
	}
}

// TestMaxCostStopsATask: with the model's prices known (gpt-4.1 is in
// fluffy's table), --max-cost stops the task once its turns cost more,
// with exit 3 and a reason naming the limit; the done event carries the
// task's cost.
func TestMaxCostStopsATask(t *testing.T) {
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-replay")
	home := harness.ShortHome(t, "fh")
	p := projects()[0]
	srv := providertest.New()
	t.Cleanup(srv.Close)
	srv.Play(providertest.OpenAITurns(p.events())...)
	u := newProject(t, fluffy, home, p, "OPENAI_API_KEY=sk-e2e-not-a-real-key", "OPENAI_BASE_URL="+srv.URL()+"/v1")
	out, stderr, code := u.Run("--provider", "openai", "--model", "gpt-4.1", "--max-cost", "0.005", "--l1", "none", "--yes", "--json", p.task)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (stopped)\nstderr:\n%s\nstdout tail:\n%s", code, stderr, harness.Tail(out, 1500))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var done struct {
		Done struct {
			Status  string  `json:"status"`
			Reason  string  `json:"reason"`
			CostUSD float64 `json:"cost_usd"`
		} `json:"done"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
		t.Fatal(err)
	}
	if done.Done.Status != "stopped" || !strings.Contains(done.Done.Reason, "--max-cost") || done.Done.CostUSD < 0.005 || done.Done.CostUSD > 0.02 {
		t.Fatalf("done %+v", done.Done)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("the fake saw %d requests; $0.0048 a turn and a $0.005 limit stop the task after 2", n)
	}
}

// TestPromptShowsTheProject: `fluffy prompt show` prints the system prompt
// the model reads next, with the project's AGENTS.md marked as repository
// text, the languages and the top of the tree without ignored files.
func TestPromptShowsTheProject(t *testing.T) {
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-replay")
	home := harness.ShortHome(t, "fh")
	p := projects()[0]
	p.files["AGENTS.md"] = "Run the tests with go test ./... and keep Count allocation-free.\n"
	p.files[".gitignore"] = "secret-notes/\n"
	p.files["secret-notes/x.txt"] = "x"
	u := newProject(t, fluffy, home, p)
	out, stderr, code := u.Run("prompt", "show")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"<<<repository file AGENTS.md>>>", "keep Count allocation-free", "They grant nothing",
		"Go (go.mod; tests run with go test)", "internal/ (norm/)", "wordfreq.go", "Git: branch main", "tokens)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the prompt lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-notes") {
		t.Fatalf("an ignored directory is in the prompt:\n%s", out)
	}
	t.Logf("fixture project's system prompt:\n%s", out)
}

// TestMCPServerFromAddToCommit is an MCP tool in a whole task as a user
// sets it up: `fluffy mcp add` a Go server built outside the project,
// the project's policy (the default with that one tool exempted from the
// MCP review and allowed, as docs/mcp.md shows) trusted with `fluffy
// policy trust --yes`, then a one-shot strict task that calls the tool,
// writes a failing test, then the source, and ends in a merged commit.
func TestMCPServerFromAddToCommit(t *testing.T) {
	harness.NeedDocker(t)
	fluffy := harness.FluffyBin(t, "provider-replay")
	home := harness.ShortHome(t, "fh")
	srvDir, err := os.MkdirTemp("", "fluffy-e2e-mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srvDir) })
	_ = os.Chmod(srvDir, 0o755)
	srv := filepath.Join(srvDir, "server")
	testbin.Into(t, "host/kernel/testdata/mcpserver", srv)
	p := projects()[0] // the Go module
	if p.name != "go" {
		t.Fatalf("projects()[0] is %s, want the Go module", p.name)
	}
	p.before = [][]harness.Call{{{Name: "mcp.greet.echo", Args: map[string]any{"text": "hello from the task"}}}}
	u := newProject(t, fluffy, home, p)
	if out, stderr, code := u.Run("mcp", "add", "greet", "--", srv); code != 0 {
		t.Fatalf("mcp add: exit %d\n%s%s", code, out, stderr)
	}
	def, err := os.ReadFile("../../policy/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const review = "  - name: mcp-tools-review\n    match: { syscall: \"mcp.*\" }\n"
	if !strings.Contains(string(def), review) {
		t.Fatalf("the default policy has no %q", review)
	}
	pol := strings.Replace(string(def), review, review+"    except:\n      - { syscall: mcp.greet.echo }\n", 1) +
		"\n  - name: greet-echo-ok\n    match: { syscall: mcp.greet.echo }\n    action: allow\n"
	if err := os.MkdirAll(filepath.Join(u.Dir, ".fluffy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(u.Dir, ".fluffy", "policy.yaml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := u.Run("policy", "trust", "--yes"); code != 0 {
		t.Fatalf("policy trust: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := u.Run("policy", "explain", "--syscall", "mcp.greet.echo"); code != 0 || !strings.Contains(out, "greet-echo-ok") {
		t.Fatalf("policy explain mcp.greet.echo: exit %d, want allowed by greet-echo-ok\n%s%s", code, out, stderr)
	}
	u.useCassette(p)
	r := u.task("--provider", "replay", "--yes", "--json", p.task)
	if len(r.tools) == 0 || r.tools[0] != "mcp.greet.echo=" {
		t.Fatalf("first tool result %q, want a successful mcp.greet.echo\nstderr:\n%s", r.tools, r.stderr)
	}
	check(t, u, p, r)
	// The project's kernel still runs and holds the audit database: it
	// answers the audit log itself.
	out, stderr, code := u.Run("audit", "log", "--limit", "0", "--json")
	if code != 0 || !strings.Contains(out, "mcp.greet.echo") {
		t.Fatalf("audit log: exit %d, want the MCP call in it\n%.2000s%s", code, out, stderr)
	}
}
