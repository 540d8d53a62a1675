package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCommands(t *testing.T) {
	c := newCLI(t)
	proj := t.TempDir()
	t.Chdir(proj)
	if out, errOut, code := c.run("config", "init", "--provider", "ollama", "--yes"); code != 0 || !strings.Contains(out, "Ollama needs no key") {
		t.Fatalf("init: %d %s %s", code, out, errOut)
	}
	if _, _, code := c.run("config", "init", "--provider", "ollama", "--yes"); code == 0 {
		t.Fatal("second init without --force succeeded")
	}
	if out, _, code := c.run("config", "get", "providers.ollama.base_url"); code != 0 || strings.TrimSpace(out) != "http://localhost:11434/v1" {
		t.Fatalf("get: %d %q", code, out)
	}
	if _, errOut, code := c.run("config", "set", "--project", "merge.auto_max_lines", "120"); code != 0 {
		t.Fatalf("set: %s", errOut)
	}
	c.vars["FLUFFY_MODEL"] = "env-model"
	out, _, code := c.run("config", "show", "--json")
	if code != 0 {
		t.Fatalf("show: %d", code)
	}
	var vals []struct{ Key, Raw, Source, Origin string }
	if err := json.Unmarshal([]byte(out), &vals); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vals {
		got[v.Key] = v.Raw + "@" + v.Source
	}
	want := map[string]string{"provider": "ollama@project", "merge.auto_max_lines": "120@project", "model": "env-model@env", "test.timeout": "300s@default"}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%s = %s, want %s", k, got[k], w)
		}
	}
	// An unknown key in the project file is an error naming file and line.
	if err := os.WriteFile(filepath.Join(proj, ".fluffy", "config.yaml"), []byte("merge:\n  auto_max_lines: 1\nsandboxx: none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.run("config", "show")
	if code == 0 || !strings.Contains(errOut, "config.yaml:3") || !strings.Contains(errOut, "sandboxx") {
		t.Fatalf("unknown key: %d %s", code, errOut)
	}
	if _, errOut, code := c.run("config", "set", "provider", "chatgpt"); code == 0 || !strings.Contains(errOut, "openai") {
		t.Fatalf("bad provider accepted: %s", errOut)
	}
}

func TestTaskDispatch(t *testing.T) {
	c := newCLI(t)
	// A mistyped command is not sent to a model as a task.
	if _, errOut, code := c.run("plugn"); code != 2 || !strings.Contains(errOut, "fluffy plugin") {
		t.Fatalf("typo: %d %s", code, errOut)
	}
	// No terminal and no task: the shell refuses with a way forward.
	if _, errOut, code := c.run(); code != 2 || !strings.Contains(errOut, "--json") {
		t.Fatalf("no tty: %d %s", code, errOut)
	}
	if _, errOut, code := c.run("--mode", "sideways", "do it"); code == 0 || !strings.Contains(errOut, "strict") {
		t.Fatalf("bad mode: %d %s", code, errOut)
	}
}
