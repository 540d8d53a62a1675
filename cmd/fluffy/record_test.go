package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --record never overwrites a file and refuses the shell, before any
// kernel starts.
func TestRecordRefusalsComeBeforeAnythingRuns(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(existing, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"existing file", []string{"--record", existing, "--project", dir, "add a test"}, "a recording never overwrites one"},
		{"shell", []string{"--record", filepath.Join(dir, "new.jsonl"), "--project", dir}, "--record needs a task"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := newCLI(t).run(c.args...)
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me\n" {
		t.Fatalf("the existing file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.jsonl")); err == nil {
		t.Fatal("the shell case created the file")
	}
	if _, err := os.Stat(filepath.Join(dir, ".fluffy")); err == nil {
		t.Fatal("a refused recording started something in the project")
	}
}
