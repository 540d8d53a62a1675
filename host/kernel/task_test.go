//go:build !race

// The whole-task tests run real containers for minutes; the race pass of
// make test covers the kernel packages' unit tests, not these.

package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// taskPlugins are the builtin plugins a whole task uses.
var taskPlugins = []string{"builtin-plugins/tool-fs", "builtin-plugins/tool-test", "builtin-plugins/provider-replay", "builtin-plugins/provider-openai", "builtin-plugins/vcs-git"}

// copyTree copies the example project into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// taskKernel opens a docker kernel on a fresh copy of examples/parseconfig
// (a git repository with one commit) whose provider replays cassette.
func taskKernel(t *testing.T, cassette string) (*kernel.Kernel, *task.Tasks, string) {
	t.Helper()
	data, err := os.ReadFile(cassette)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"cassette": string(data)})
	return providerKernel(t, "provider-replay", "replay", cfg)
}

// providerKernel is taskKernel with any provider plugin and its config.
func providerKernel(t *testing.T, providerName, model string, cfg []byte) (*kernel.Kernel, *task.Tasks, string) {
	t.Helper()
	return projectKernel(t, "../../examples/parseconfig", providerName, model, cfg)
}

// projectKernel opens a docker kernel on a fresh git copy of project src.
func projectKernel(t *testing.T, src, providerName, model string, cfg []byte, opts ...func(*task.Options)) (*kernel.Kernel, *task.Tasks, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the end-to-end task tests need git on PATH")
	}
	ws := t.TempDir()
	copyTree(t, src, ws)
	git(t, ws, "init", "-q", "-b", "main")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "parseconfig")
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	var dirs []string
	for _, p := range taskPlugins {
		dirs = append(dirs, kerneltest.Stage(t, p))
	}
	adapter := kerneltest.Build(t, "builtin-plugins/runtime-docker")
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	ctx := context.Background()
	k, err := kernel.Open(ctx, kernel.Options{Home: home, Workspace: ws, SessionID: "task", Logger: log,
		Getenv: func(k string) string { return env[k] }, BuiltinDirs: []string{filepath.Dir(dirs[0])},
		PluginConfig: map[string][]byte{providerName: cfg}, StartTimeout: 2 * time.Minute})
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	to := task.Options{Provider: providerName, Model: model, Logger: log}
	for _, o := range opts {
		o(&to)
	}
	tasks, err := k.OpenTasks(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tasks.Close)
	return k, tasks, ws
}

// events collects a task's events.
type events struct {
	mu  sync.Mutex
	all []agent.Event
}

func (e *events) add(ev agent.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// recorded is the task's cassette: its recorded_turn lines.
func (e *events) recorded() string {
	var b strings.Builder
	for _, ev := range e.all {
		if ev.Type == agent.EventRecorded {
			b.Write(ev.Recorded)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func (e *events) states() []string {
	var out []string
	for _, ev := range e.all {
		if ev.Type == agent.EventStateChanged && ev.State != nil {
			out = append(out, ev.State.To)
		}
	}
	return out
}

func (e *events) tools() []string {
	var out []string
	for _, ev := range e.all {
		if ev.Type == agent.EventToolResult && ev.Tool != nil {
			s := ev.Tool.Name
			if ev.Tool.TestStatus != "" {
				s += "=" + ev.Tool.TestStatus
			}
			if !ev.Tool.OK {
				code := "error"
				if ev.Tool.Error != nil {
					code = ev.Tool.Error.Code
				}
				s += "!" + code
			}
			out = append(out, s)
		}
	}
	return out
}

// TestStrictTaskEndToEnd is a whole strict-mode task on a real Go project
// in real containers: plan → failing test written and run (red) → source
// written → green → review (auto-merge criteria) → merged → committed.
func TestStrictTaskEndToEnd(t *testing.T) {
	k, tasks, ws := taskKernel(t, "../../examples/cassettes/parseconfig.jsonl")
	var ev events
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done, err := tasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig", Yes: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools: %v", ev.tools())
	t.Logf("states: %v", ev.states())
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s\ntools: %v\nstates: %v", done.Status, done.Reason, ev.tools(), ev.states())
	}
	wantStates := []string{"test_writing", "code_writing", "reviewing", "idle"}
	got := strings.Join(ev.states(), " ")
	pos := 0
	for _, s := range wantStates {
		i := strings.Index(got[pos:], s)
		if i < 0 {
			t.Fatalf("states %q do not pass through %v in order", got, wantStates)
		}
		pos += i + len(s)
	}
	if tl := strings.Join(ev.tools(), " "); !strings.Contains(tl, "test.run=red") || !strings.Contains(tl, "test.run=green") {
		t.Fatalf("tool results %s: want a red then a green test run", tl)
	}
	src, _ := os.ReadFile(filepath.Join(ws, "src", "config.go"))
	if !strings.Contains(string(src), "unknown key") {
		t.Fatalf("the project's src/config.go was not merged:\n%s", src)
	}
	if _, err := os.Stat(filepath.Join(ws, "src", "config_errors_test.go")); err != nil {
		t.Fatalf("the new test was not merged: %v", err)
	}
	log := git(t, ws, "log", "--format=%H %s")
	if n := len(strings.Split(strings.TrimSpace(log), "\n")); n != 2 || done.Commit == "" || !strings.HasPrefix(log, done.Commit) {
		t.Fatalf("want one new commit %q on top of the first, git log:\n%s", done.Commit, log)
	}
	if st := git(t, ws, "status", "--porcelain", "--", "src"); strings.TrimSpace(st) != "" {
		t.Fatalf("merged paths are not clean after the commit:\n%s", st)
	}
	// The merged project passes its own tests on the host too.
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("merged project's tests fail on the host: %v\n%s", err, out)
	}
	// Every step is in the verified audit log.
	rep, err := k.Audit.Verify(context.Background(), true)
	if err != nil || len(rep.Breaks) > 0 {
		t.Fatalf("audit verify: %v %+v", err, rep.Breaks)
	}
	recs, err := k.Audit.Query(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.EventType)]++
	}
	for _, ty := range []string{"tool_execute", "tool_result", "state_transition", "merge_approved"} {
		if seen[ty] == 0 {
			t.Errorf("no %s record in the audit log (have %v)", ty, seen)
		}
	}
}

// TestSourceFirstIsRefusedThenRecovers: the model tries to change source
// before a failing test exists; it gets ToolUnavailableError, writes the
// test, and finishes test-first.
func TestSourceFirstIsRefusedThenRecovers(t *testing.T) {
	_, tasks, ws := taskKernel(t, "../../examples/cassettes/parseconfig-source-first.jsonl")
	var ev events
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// No terminal and no --yes: the task gets to a mergeable change and
	// stops there, the project untouched.
	done, err := tasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig"}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	tl := strings.Join(ev.tools(), " ")
	t.Logf("tools: %s", tl)
	if !strings.Contains(tl, "fs.write!TOOL_UNAVAILABLE") && !strings.Contains(tl, "fs.write!POLICY_DENIED") {
		t.Fatalf("writing source before the test was not refused: %s", tl)
	}
	if done.Status != agent.StatusStopped || !strings.Contains(done.Summary, "--yes") {
		t.Fatalf("an unattended task without --yes ended %s: %s %s (tools %s)", done.Status, done.Reason, done.Summary, tl)
	}
	if src, _ := os.ReadFile(filepath.Join(ws, "src", "config.go")); strings.Contains(string(src), "unknown key") {
		t.Fatal("merged without a person and without --yes")
	}
	// With --yes the session continues where it stopped and merges.
	done, err = tasks.Run(ctx, task.Request{Prompt: "merge it", Yes: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s (tools %s)", done.Status, done.Reason, strings.Join(ev.tools(), " "))
	}
	if src, _ := os.ReadFile(filepath.Join(ws, "src", "config.go")); !strings.Contains(string(src), "unknown key") {
		t.Fatal("the change was not merged after recovering")
	}
}

// openAIScripts turns a cassette into what the OpenAI Chat Completions API
// streams for the same turns, byte for byte as the service sends them.
func openAIScripts(t *testing.T, path string) []providertest.Script {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cas, err := cassette.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	turns := make([][]provider.Event, 0, len(cas.Turns))
	for _, turn := range cas.Turns {
		turns = append(turns, turn.Events)
	}
	return providertest.OpenAITurns(turns)
}

// TestStrictTaskWithOpenAI is the same task with provider-openai in its
// container talking to a local fake of the Chat Completions API through
// the kernel's proxy (the configured base URL's host is allowed).
func TestStrictTaskWithOpenAI(t *testing.T) {
	srv := providertest.New()
	t.Cleanup(srv.Close)
	srv.Play(openAIScripts(t, "../../examples/cassettes/parseconfig.jsonl")...)
	cfg, _ := json.Marshal(map[string]string{"base_url": srv.URL() + "/v1", "api_key": "sk-test-not-a-real-key", "model": "gpt-4.1"})
	_, tasks, ws := providerKernel(t, "provider-openai", "gpt-4.1", cfg)
	var ev events
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done, err := tasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig", Yes: true, Record: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agent.StatusDone {
		t.Fatalf("task ended %s: %s\ntools: %v\nstates: %v", done.Status, done.Reason, ev.tools(), ev.states())
	}
	if src, _ := os.ReadFile(filepath.Join(ws, "src", "config.go")); !strings.Contains(string(src), "unknown key") {
		t.Fatal("the change was not merged")
	}
	reqs := srv.Requests()
	if len(reqs) < 4 {
		t.Fatalf("the fake saw %d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test-not-a-real-key" {
			t.Fatalf("request %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
		}
	}
	// The second request carries the first turn's tool results: the loop
	// fed them back in OpenAI's shape.
	if !strings.Contains(string(reqs[1].Body), `"role":"tool"`) {
		t.Fatalf("the second request has no tool results:\n%.2000s", reqs[1].Body)
	}

	// --record: every turn became a cassette line, without the key; the
	// cassette replays the task offline, and recording the replay gives
	// the same cassette byte for byte.
	recorded := ev.recorded()
	if strings.Count(recorded, "\n") != len(reqs) {
		t.Fatalf("%d turns recorded for %d requests", strings.Count(recorded, "\n"), len(reqs))
	}
	if strings.Contains(recorded, "sk-test-not-a-real-key") {
		t.Fatal("the API key is in the cassette")
	}
	file := filepath.Join(t.TempDir(), "recorded.jsonl")
	if err := os.WriteFile(file, []byte(recorded), 0o600); err != nil {
		t.Fatal(err)
	}
	_, replayTasks, ws2 := taskKernel(t, file)
	var ev2 events
	done2, err := replayTasks.Run(ctx, task.Request{Prompt: "add error handling to parseConfig", Yes: true, Record: true}, ev2.add)
	if err != nil || done2.Status != agent.StatusDone {
		t.Fatalf("replaying the recording: %v %+v\ntools: %v", err, done2, ev2.tools())
	}
	if again := ev2.recorded(); again != recorded {
		t.Fatalf("the replay's recording differs from the original:\n%s\n---\n%s", again, recorded)
	}
	if src, _ := os.ReadFile(filepath.Join(ws2, "src", "config.go")); !strings.Contains(string(src), "unknown key") {
		t.Fatal("the replayed change was not merged")
	}
}

// scriptedCall is one tool call of a scripted model turn.
type scriptedCall struct {
	id, name string
	args     map[string]any
}

// scriptedCassette writes a cassette whose turns make the calls given
// (arguments streamed in two fragments) and end with a text-only turn.
func scriptedCassette(t *testing.T, turns [][]scriptedCall) string {
	t.Helper()
	var b strings.Builder
	w := cassette.NewWriter(&b)
	w.CheckRequests = false
	add := func(evs []provider.Event) {
		if err := w.Add(provider.ChatRequest{}, evs); err != nil {
			t.Fatal(err)
		}
	}
	for _, calls := range turns {
		var evs []provider.Event
		for _, c := range calls {
			a, _ := json.Marshal(c.args)
			half := len(a) / 2
			evs = append(evs,
				provider.Event{ToolCallStart: &provider.ToolCallStart{CallID: c.id, Name: c.name}},
				provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: c.id, ArgumentsDelta: string(a[:half])}},
				provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: c.id, ArgumentsDelta: string(a[half:])}},
				provider.Event{ToolCallEnd: &provider.ToolCallEnd{CallID: c.id, Name: c.name, Arguments: a}})
		}
		add(append(evs, provider.Event{Done: &provider.Done{StopReason: provider.StopToolUse}}))
	}
	add([]provider.Event{{TextDelta: "Done."}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}})
	file := filepath.Join(t.TempDir(), "scripted.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// languageTask is a small project in one language and the change a
// scripted model makes to it test-first.
type languageTask struct {
	name     string
	needs    []string // host commands, one of which must exist
	files    map[string]string
	testPath string
	newTest  string
	srcPath  string
	newSrc   string
	hostRun  []string // the merged project's tests on the host ("" first: the found need)
	hostWant string
}

var languageTasks = []languageTask{
	{
		name: "python", needs: []string{"pytest", "pytest-3"},
		// A src layout (the default policy lets the AI write under src/
		// and tests/); conftest.py puts src on the import path.
		files: map[string]string{
			"conftest.py":        "import os\nimport sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), \"src\"))\n",
			"src/calc.py":        "def add(a, b):\n    return a + b\n",
			"tests/test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
		},
		testPath: "tests/test_sub.py", newTest: "import calc\n\n\ndef test_sub():\n    assert calc.sub(5, 3) == 2\n",
		srcPath: "src/calc.py", newSrc: "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
		hostRun: []string{"", "-q", "-p", "no:cacheprovider"}, hostWant: "2 passed",
	},
	{
		name: "node", needs: []string{"node", "nodejs"},
		files: map[string]string{
			"package.json":       `{"name":"calc","version":"1.0.0"}`,
			"src/calc.js":        "function add(a, b) { return a + b; }\nmodule.exports = { add };\n",
			"tests/calc.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\nconst calc = require('../src/calc');\ntest('adds', () => { assert.strictEqual(calc.add(2, 3), 5); });\n",
		},
		testPath: "tests/sub.test.js", newTest: "const test = require('node:test');\nconst assert = require('node:assert');\nconst calc = require('../src/calc');\ntest('subtracts', () => { assert.strictEqual(calc.sub(5, 3), 2); });\n",
		srcPath: "src/calc.js", newSrc: "function add(a, b) { return a + b; }\nfunction sub(a, b) { return a - b; }\nmodule.exports = { add, sub };\n",
		hostRun: []string{"", "--test"}, hostWant: "# pass 2",
	},
	{
		// The new integration test imports a function that does not
		// exist yet: rustc's E0432 in tests/, which is red.
		name: "rust", needs: []string{"cargo"},
		files: map[string]string{
			"Cargo.toml":    "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
			"src/lib.rs":    "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
			"tests/calc.rs": "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
		},
		testPath: "tests/sub.rs", newTest: "use calc::sub;\n\n#[test]\nfn subtracts() {\n    assert_eq!(sub(5, 3), 2);\n}\n",
		srcPath: "src/lib.rs", newSrc: "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
		hostRun: []string{"", "test", "--offline"}, hostWant: "test result: ok. 1 passed",
	},
}

// TestStrictTaskInOtherLanguages is the whole loop on a Python project
// (pytest), a Node project (node --test) and a Rust package (cargo
// test): the failing test is written, the runner runs it in the sandbox
// on the session's view (red), the source is written (green), merged,
// committed, and the merged project's tests pass on the host.
func TestStrictTaskInOtherLanguages(t *testing.T) {
	for _, lt := range languageTasks {
		t.Run(lt.name, func(t *testing.T) {
			found := ""
			for _, c := range lt.needs {
				if p, err := exec.LookPath(c); err == nil && found == "" {
					found = p
				}
			}
			if found == "" {
				t.Fatalf("the %s task test needs one of %v on the host (.ci/run installs it)", lt.name, lt.needs)
			}
			src := t.TempDir()
			for name, content := range lt.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			file := scriptedCassette(t, [][]scriptedCall{
				{{"p1", "plan.complete", map[string]any{"plan": "1. " + lt.testPath + ": sub(5, 3) == 2 (fails: no sub yet). 2. " + lt.srcPath + ": add sub. 3. Red, then green."}}},
				{{"w1", "fs.write", map[string]any{"path": lt.testPath, "content": lt.newTest}}, {"r1", "test.run", map[string]any{}}},
				{{"w2", "fs.write", map[string]any{"path": lt.srcPath, "content": lt.newSrc}}, {"r2", "test.run", map[string]any{}}},
			})
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := json.Marshal(map[string]string{"cassette": string(data)})
			_, tasks, ws := projectKernel(t, src, "provider-replay", "replay", cfg)
			var ev events
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			done, err := tasks.Run(ctx, task.Request{Prompt: "add sub to calc", Yes: true}, ev.add)
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != agent.StatusDone {
				t.Fatalf("task ended %s: %s\ntools: %v\nstates: %v", done.Status, done.Reason, ev.tools(), ev.states())
			}
			if tl := strings.Join(ev.tools(), " "); !strings.Contains(tl, "test.run=red") || !strings.Contains(tl, "test.run=green") {
				t.Fatalf("tool results %s: want a red then a green test run", tl)
			}
			for path, want := range map[string]string{lt.srcPath: lt.newSrc, lt.testPath: lt.newTest} {
				if got, _ := os.ReadFile(filepath.Join(ws, path)); string(got) != want {
					t.Fatalf("%s was not merged:\n%s", path, got)
				}
			}
			log := git(t, ws, "log", "--format=%H %s")
			if n := len(strings.Split(strings.TrimSpace(log), "\n")); n != 2 || done.Commit == "" || !strings.HasPrefix(log, done.Commit) {
				t.Fatalf("want one new commit %q on top of the first, git log:\n%s", done.Commit, log)
			}
			cmd := exec.Command(found, lt.hostRun[1:]...)
			cmd.Dir = ws
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), lt.hostWant) {
				t.Fatalf("the merged project's tests on the host: %v\n%s", err, out)
			}
		})
	}
}
