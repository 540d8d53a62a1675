package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
)

// A Go module laid out as `go mod init` leaves it: code at the root, no
// src/. csvBroken drops empty fields; csvFixed keeps them.
const (
	csvBroken = "package csvx\n\nimport \"strings\"\n\n// Fields splits a CSV line.\nfunc Fields(line string) []string {\n\tvar out []string\n\tfor _, f := range strings.Split(line, \",\") {\n\t\tif f != \"\" {\n\t\t\tout = append(out, f)\n\t\t}\n\t}\n\treturn out\n}\n"
	csvFixed  = "package csvx\n\nimport \"strings\"\n\n// Fields splits a CSV line; empty fields are kept.\nfunc Fields(line string) []string {\n\treturn strings.Split(line, \",\")\n}\n"
	csvTest   = "package csvx\n\nimport \"testing\"\n\nfunc TestFieldsKeepsEmpty(t *testing.T) {\n\tif got := Fields(\"a,,b\"); len(got) != 3 {\n\t\tt.Fatalf(\"Fields(a,,b) = %q, want 3 fields\", got)\n\t}\n}\n"
)

// The same change in a Python package directory (the test beside the
// code, pytest's test_*.py) and a Node project (lib/ and __tests__/).
const (
	pyBroken = "def fields(line):\n    return [f for f in line.split(',') if f]\n"
	pyFixed  = "def fields(line):\n    return line.split(',')\n"
	pyTest   = "from mypkg.core import fields\n\n\ndef test_fields_keeps_empty():\n    assert len(fields('a,,b')) == 3\n"
	jsBroken = "function fields(line) { return line.split(',').filter((f) => f !== ''); }\nmodule.exports = { fields };\n"
	jsFixed  = "function fields(line) { return line.split(','); }\nmodule.exports = { fields };\n"
	jsTest   = "const test = require('node:test');\nconst assert = require('node:assert');\nconst { fields } = require('../lib/fields');\ntest('keeps empty fields', () => { assert.strictEqual(fields('a,,b').length, 3); });\n"
)

// replayTurn is one scripted model turn in the cassette format
// (docs/providers.md): text, then each tool call streamed in two halves.
func replayTurn(n int, text string, calls ...[2]any) map[string]any {
	var ev []map[string]any
	ev = append(ev, map[string]any{"text_delta": text})
	for i, c := range calls {
		id := "c" + string(rune('a'+n)) + string(rune('0'+i))
		name := c[0].(string)
		args, _ := json.Marshal(c[1])
		half := len(args) / 2
		ev = append(ev,
			map[string]any{"tool_call_start": map[string]any{"call_id": id, "name": name}},
			map[string]any{"tool_call_delta": map[string]any{"call_id": id, "arguments_delta": string(args[:half])}},
			map[string]any{"tool_call_delta": map[string]any{"call_id": id, "arguments_delta": string(args[half:])}},
			map[string]any{"tool_call_end": map[string]any{"call_id": id, "name": name, "arguments": c[1]}})
	}
	stop := "tool_use"
	if len(calls) == 0 {
		stop = "end_turn"
	}
	ev = append(ev, map[string]any{"usage": map[string]any{"input_tokens": 1000, "output_tokens": 100}},
		map[string]any{"done": map[string]any{"stop_reason": stop, "model": "replay"}})
	return map[string]any{"turn": n, "events": ev}
}

// TestTaskOnUsualLayouts: on the default policy, a strict task in a
// project laid out as its community does it — a fresh `go mod init` module
// with its code at the root, a Python package directory with the test
// beside the code, a Node lib/ with __tests__/ — gets its test written,
// red, its source written, green, and merged; and "make the failing tests
// pass" (the project's own test is already red) reaches the source without
// writing a test.
func TestTaskOnUsualLayouts(t *testing.T) {
	needDockerCLI(t)
	for _, tool := range []string{"git", "go", "python3", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s", tool)
		}
	}
	fluffy := fluffyLayout(t, "tool-test", "provider-replay", "vcs-git")
	plan := [2]any{"plan.complete", map[string]any{"plan": "1. a test for empty fields. 2. keep them. 3. red, then green."}}
	write := func(path, content string) [2]any {
		return [2]any{"fs.write", map[string]any{"path": path, "content": content}}
	}
	testRun := [2]any{"test.run", map[string]any{}}
	// testFirst: the session writes the failing test, then the code.
	testFirst := func(testPath, test, srcPath, src string) []map[string]any {
		return []map[string]any{
			replayTurn(1, "Plan.", plan),
			replayTurn(2, "First the failing test.", write(testPath, test), testRun),
			replayTurn(3, "Red. Now the fix.", write(srcPath, src), testRun),
			replayTurn(4, "Done."),
		}
	}
	testFirstResults := []string{"plan.complete=", "fs.write=", "test.run=red", "fs.write=", "test.run=green"}
	cases := []struct {
		name    string
		init    []string          // a command run in the fresh project, if any
		files   map[string]string // the project before the task
		turns   []map[string]any
		results []string // tool=test status, in order
		changed []string // files of the task's commit
		srcPath string   // holds fixed after the merge
		fixed   string
	}{
		{
			name:    "go module at the root: test first, then the code",
			init:    []string{"go", "mod", "init", "example.com/csvx"},
			files:   map[string]string{"csv.go": csvBroken},
			turns:   testFirst("csv_test.go", csvTest, "csv.go", csvFixed),
			results: testFirstResults,
			changed: []string{"csv.go", "csv_test.go"},
			srcPath: "csv.go", fixed: csvFixed,
		},
		{
			name:  "go module at the root: make the failing tests pass",
			init:  []string{"go", "mod", "init", "example.com/csvx"},
			files: map[string]string{"csv.go": csvBroken, "csv_test.go": csvTest},
			turns: []map[string]any{
				replayTurn(1, "Plan.", plan),
				replayTurn(2, "Run the existing tests.", testRun),
				replayTurn(3, "Red. Now the fix.", write("csv.go", csvFixed), testRun),
				replayTurn(4, "Done."),
			},
			results: []string{"plan.complete=", "test.run=red", "fs.write=", "test.run=green"},
			changed: []string{"csv.go"},
			srcPath: "csv.go", fixed: csvFixed,
		},
		{
			name:    "python package directory, test beside the code",
			files:   map[string]string{"pyproject.toml": "[project]\nname = \"mypkg\"\nversion = \"0.1.0\"\n", "mypkg/__init__.py": "", "mypkg/core.py": pyBroken},
			turns:   testFirst("mypkg/test_core.py", pyTest, "mypkg/core.py", pyFixed),
			results: testFirstResults,
			changed: []string{"mypkg/core.py", "mypkg/test_core.py"},
			srcPath: "mypkg/core.py", fixed: pyFixed,
		},
		{
			name:    "node lib/ and __tests__/",
			files:   map[string]string{"package.json": `{"name":"fields","version":"1.0.0"}`, "lib/fields.js": jsBroken},
			turns:   testFirst("__tests__/fields.test.js", jsTest, "lib/fields.js", jsFixed),
			results: testFirstResults,
			changed: []string{"__tests__/fields.test.js", "lib/fields.js"},
			srcPath: "lib/fields.js", fixed: jsFixed,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := shortHome(t)
			ws := t.TempDir()
			run := func(name string, args ...string) {
				t.Helper()
				cmd := exec.Command(name, args...)
				cmd.Dir, cmd.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home, "GOTOOLCHAIN=local")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", name, args, err, out)
				}
			}
			if c.init != nil {
				run(c.init[0], c.init[1:]...)
			}
			for p, content := range c.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, p), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run("git", "init", "-q", "-b", "main")
			run("git", "add", "-A")
			run("git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
			var cas strings.Builder
			for _, tn := range c.turns {
				b, _ := json.Marshal(tn)
				cas.Write(b)
				cas.WriteByte('\n')
			}
			casFile := filepath.Join(t.TempDir(), "cassette.jsonl")
			if err := os.WriteFile(casFile, []byte(cas.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			run(fluffy, "config", "set", "--project", "provider", "replay")
			run(fluffy, "config", "set", "--project", "providers.replay.cassette", casFile)

			cmd := exec.Command(fluffy, "--json", "--yes", "--l1", "none", "fix Fields")
			cmd.Dir = ws
			cmd.Env = append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_RUNTIME_ADAPTER="+filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker"))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			t.Cleanup(func() {
				stop := exec.Command(fluffy, "kernel", "stop")
				stop.Dir, stop.Env = ws, append(os.Environ(), "FLUFFY_HOME="+home)
				_ = stop.Run()
			})
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var last agent.Event
			var results []string
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			sc.Buffer(make([]byte, 1<<20), 8<<20)
			for sc.Scan() {
				var ev agent.Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatalf("stdout line is not a JSON event: %q", sc.Text())
				}
				if ev.Type == agent.EventToolResult && ev.Tool != nil {
					r := ev.Tool.Name + "=" + ev.Tool.TestStatus
					if ev.Tool.Error != nil {
						r += "!" + ev.Tool.Error.Code + ": " + ev.Tool.Error.What
					}
					results = append(results, r)
				}
				last = ev
			}
			if code != 0 || last.Type != agent.EventDone || last.Done == nil || last.Done.Status != agent.StatusDone || !slices.Equal(results, c.results) {
				t.Fatalf("exit %d, last %+v (done %+v)\ntool results: %q\nwant:         %q\nstderr:\n%s", code, last, last.Done, results, c.results, stderr.String())
			}
			g := exec.Command("git", "show", "--name-only", "--format=", "HEAD")
			g.Dir = ws
			names, err := g.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Fields(string(names)); !slices.Equal(got, c.changed) {
				t.Fatalf("the task's commit changed %q, want %q", got, c.changed)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, c.srcPath)); string(got) != c.fixed {
				t.Fatalf("%s after the merge:\n%s", c.srcPath, got)
			}
		})
	}
}
