package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestInitDetectsTheProjectAndWritesItsConfig runs `fluffy init` on a Go,
// a Python, a Node and a Rust project: on a terminal it says what it found
// and what the AI may write, asks, and writes .fluffy/config.yaml; without
// one --provider … --yes writes it without a question.
func TestInitDetectsTheProjectAndWritesItsConfig(t *testing.T) {
	cases := []struct {
		name, file, content string
		wantLang, manifest  string
	}{
		{"go", "go.mod", "module example.com/x\n\ngo 1.22\n", "Go (go.mod; tests run with go test)", "go.mod"},
		{"python", "pyproject.toml", "[project]\nname = \"x\"\n", "Python (pyproject.toml; tests run with pytest)", "pyproject.toml"},
		{"python setup.py", "setup.py", "from setuptools import setup\nsetup()\n", "Python (setup.py; tests run with pytest)", "setup.py"},
		{"node", "package.json", "{\"name\": \"x\"}\n", "Node (package.json; tests run with node --test)", "package.json"},
		{"rust", "Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n", "Rust (Cargo.toml; tests run with cargo test)", "Cargo.toml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			c := newCLI(t)
			// On a terminal: the guide, then the questions (provider,
			// model, write?).
			out, errOut, code := c.runIn("anthropic\nclaude-test-model\ny\n", true, "init", "--project", dir)
			if code != 0 {
				t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
			}
			for _, want := range []string{
				"project: " + tc.wantLang,
				tc.manifest, "after your review", // the policy reviews the manifest
				".env", "never — secrets are never readable or writable",
				"a failing test first",
				"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ollama", "replay",
				"wrote " + filepath.Join(dir, ".fluffy", "config.yaml") + ": provider anthropic, model claude-test-model",
				"ANTHROPIC_API_KEY is not set in this shell",
			} {
				if !strings.Contains(out, want) {
					t.Fatalf("init's output lacks %q:\n%s", want, out)
				}
			}
			c.vars["ANTHROPIC_API_KEY"] = "sk-ant-test-0000"
			got, _, code := c.run("config", "show", "--project", dir, "--json")
			var vals []struct{ Key, Raw, Source string }
			if err := json.Unmarshal([]byte(got), &vals); err != nil || code != 0 {
				t.Fatalf("config show: %d %v\n%s", code, err, got)
			}
			seen := map[string]string{}
			for _, v := range vals {
				seen[v.Key] = v.Raw + "@" + v.Source
			}
			if seen["provider"] != "anthropic@project" || seen["providers.anthropic.model"] != "claude-test-model@project" {
				t.Fatalf("config after init: provider %s, model %s", seen["provider"], seen["providers.anthropic.model"])
			}
			if b, _ := os.ReadFile(filepath.Join(dir, ".fluffy", "config.yaml")); strings.Contains(string(b), "sk-ant") {
				t.Fatalf("the key reached the config file:\n%s", b)
			}

			// Without a terminal, the flags alone; an existing file needs
			// --force; `fluffy config init` is the same command.
			if _, errOut, code := c.run("init", "--project", dir, "--provider", "openai", "--model", "gpt-test", "--yes"); code != 1 || !strings.Contains(errOut, "CONFIG_EXISTS") {
				t.Fatalf("init over an existing file: exit %d %s", code, errOut)
			}
			out, errOut, code = c.run("config", "init", "--project", dir, "--provider", "openai", "--model", "gpt-test", "--yes", "--force")
			if code != 0 || !strings.Contains(out, "provider openai, model gpt-test") {
				t.Fatalf("config init --force: exit %d\n%s\n%s", code, out, errOut)
			}
			if _, errOut, code := c.run("init", "--project", t.TempDir()); code != 2 || !strings.Contains(errOut, "--provider is required without a terminal") {
				t.Fatalf("init without a terminal or flags: exit %d %s", code, errOut)
			}
		})
	}
}

// TestDetectProjectFindsNothingInAnEmptyDir: a directory with no marker
// file says so instead of guessing a language.
func TestDetectProjectFindsNothingInAnEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if l := detectProject(dir); len(l) != 0 {
		t.Fatalf("detected %+v in an empty directory", l)
	}
	if s := langLine(nil); !strings.Contains(s, "finds no runner") {
		t.Fatalf("langLine(nil) = %q", s)
	}
}

// TestResolveProviderPrecedence: --provider beats FLUFFY_PROVIDER beats
// the project's config beats the user's; `model` from a config file does
// not follow a provider named on the command line; a provider needing a
// key that is missing fails naming the variable.
func TestResolveProviderPrecedence(t *testing.T) {
	cases := []struct {
		name      string
		user, prj string // config file contents
		vars      map[string]string
		flags     taskFlags
		repl      [2]string // /provider, /model
		want      string    // name/model, or the error code
	}{
		{"project beats user", "provider: openai\n", "provider: anthropic\n", map[string]string{"ANTHROPIC_API_KEY": "k-123456789"}, taskFlags{}, [2]string{}, "anthropic/claude-sonnet-4-5"},
		{"env beats project", "", "provider: anthropic\n", map[string]string{"FLUFFY_PROVIDER": "openai", "OPENAI_API_KEY": "k-123456789"}, taskFlags{}, [2]string{}, "openai/gpt-4.1"},
		{"flag beats env", "", "", map[string]string{"FLUFFY_PROVIDER": "openai", "ANTHROPIC_API_KEY": "k-123456789"}, taskFlags{provider: "anthropic", model: "m-flag"}, [2]string{}, "anthropic/m-flag"},
		{"config model stays with its provider", "", "provider: openai\nmodel: gpt-x\n", map[string]string{"ANTHROPIC_API_KEY": "k-123456789"}, taskFlags{provider: "anthropic"}, [2]string{}, "anthropic/claude-sonnet-4-5"},
		{"config model with its provider", "", "provider: openai\nmodel: gpt-x\n", map[string]string{"OPENAI_API_KEY": "k-123456789"}, taskFlags{}, [2]string{}, "openai/gpt-x"},
		{"FLUFFY_MODEL", "", "provider: openai\n", map[string]string{"OPENAI_API_KEY": "k-123456789", "FLUFFY_MODEL": "gpt-env"}, taskFlags{}, [2]string{}, "openai/gpt-env"},
		{"REPL /provider and /model win", "", "provider: openai\n", map[string]string{"ANTHROPIC_API_KEY": "k-123456789"}, taskFlags{}, [2]string{"anthropic", "claude-repl"}, "anthropic/claude-repl"},
		{"ollama needs no key", "", "provider: ollama\n", nil, taskFlags{}, [2]string{}, "ollama/qwen2.5-coder"},
		{"missing key", "", "provider: openai\n", nil, taskFlags{}, [2]string{}, CodeNoKey},
		{"nothing configured", "", "", nil, taskFlags{}, [2]string{}, "TASK_NO_PROVIDER"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home, prj := t.TempDir(), t.TempDir()
			if tc.user != "" {
				os.WriteFile(filepath.Join(home, "config.yaml"), []byte(tc.user), 0o600)
			}
			if tc.prj != "" {
				os.MkdirAll(filepath.Join(prj, ".fluffy"), 0o755)
				os.WriteFile(filepath.Join(prj, ".fluffy", "config.yaml"), []byte(tc.prj), 0o600)
			}
			e := &env{home: home, getenv: func(k string) string { return tc.vars[k] }}
			f := tc.flags
			f.project = prj
			cfg, err := loadTaskConfig(e, f)
			if err != nil {
				t.Fatal(err)
			}
			tp, err := resolveProvider(e, cfg, tc.repl[0], tc.repl[1])
			got := tp.name + "/" + tp.model
			if err != nil {
				got = errCode(err)
				if got == CodeNoKey && !strings.Contains(err.Error(), "OPENAI_API_KEY") {
					t.Fatalf("the missing-key error does not name the variable: %v", err)
				}
			}
			if got != tc.want {
				t.Fatalf("got %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}

func errCode(err error) string { return uerr.From(err).Code }

// TestInitWithoutQuestions: `fluffy init` with flags only, as a script
// runs it.
func TestInitWithoutQuestions(t *testing.T) {
	cassette, err := filepath.Abs("../../examples/cassettes/parseconfig.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		code     int
		out, key string // wanted in the output; wanted key=value in config
	}{
		{"replay with its cassette", []string{"--provider", "replay", "--cassette", cassette, "--yes"}, 0, "provider replay", "providers.replay.cassette=" + cassette},
		{"openai with a model", []string{"--provider", "openai", "--model", "gpt-x", "--yes"}, 0, "OPENAI_API_KEY is not set", "providers.openai.model=gpt-x"},
		{"ollama", []string{"--provider", "ollama"}, 0, "Ollama needs no key", "provider=ollama"},
		{"unknown provider", []string{"--provider", "gpt", "--yes"}, 2, `unknown provider "gpt"`, ""},
		{"missing cassette", []string{"--provider", "replay", "--cassette", "/nonexistent/c.jsonl", "--yes"}, 1, "cannot read the cassette", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newCLI(t)
			out, errOut, code := c.run(append([]string{"init", "--project", dir}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.out) {
				t.Fatalf("exit %d (want %d)\n%s\n%s", code, tc.code, out, errOut)
			}
			if tc.key == "" {
				if _, err := os.Stat(filepath.Join(dir, ".fluffy", "config.yaml")); err == nil {
					t.Fatal("a failed init wrote the config")
				}
				return
			}
			// Scripted too, init says what it found before it writes.
			if !strings.Contains(out, "project: no go.mod") || !strings.Contains(out, ".env") {
				t.Fatalf("init without questions did not report the project and the policy:\n%s", out)
			}
			k, v, _ := strings.Cut(tc.key, "=")
			got, _, _ := c.run("config", "get", "--project", dir, k)
			if strings.TrimSpace(got) != v {
				t.Fatalf("%s = %q, want %q", k, strings.TrimSpace(got), v)
			}
		})
	}
}

// TestInitNamesTheProjectsOwnFiles: what the AI may write is shown on a
// source and a test file of the project, in its own layout; the language's
// sample names stand in only where it has none.
func TestInitNamesTheProjectsOwnFiles(t *testing.T) {
	lang := func(name string) projectLang {
		for _, l := range knownLangs {
			if l.name == name {
				return l
			}
		}
		t.Fatalf("no language %s", name)
		return projectLang{}
	}
	for _, tc := range []struct {
		name         string
		lang         string
		files        []string
		source, test string
	}{
		{"go at the root", "Go", []string{"go.mod", "stack.go", "stack_test.go"}, "stack.go", "stack_test.go"},
		{"go in packages", "Go", []string{"go.mod", "cmd/app/main.go", "internal/cfg/cfg.go", "internal/cfg/cfg_test.go"}, "cmd/app/main.go", "internal/cfg/cfg_test.go"},
		{"python package", "Python", []string{"pyproject.toml", "slugs/__init__.py", "slugs/core.py", "tests/conftest.py", "tests/test_core.py"}, "slugs/core.py", "tests/test_core.py"},
		{"node", "Node", []string{"package.json", "node_modules/x/index.js", "src/app.js", "src/app.test.js"}, "src/app.js", "src/app.test.js"},
		{"rust", "Rust", []string{"Cargo.toml", "src/lib.rs", "tests/it.rs", "target/debug/build.rs"}, "src/lib.rs", "tests/it.rs"},
		{"hidden and vendored only", "Go", []string{"go.mod", ".git/x.go", "vendor/a/a.go"}, "main.go", "main_test.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(f))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			src, test := projectSamples(dir, lang(tc.lang))
			if src != tc.source || test != tc.test {
				t.Fatalf("samples: got %s, %s; want %s, %s", src, test, tc.source, tc.test)
			}
		})
	}
}
