package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallSaysWhyAPluginDoesNotRun: a disabled plugin is
// reported as disabled with the user's reason and how to enable it (not
// "no plugin named X is loaded"), and a mistyped --project is refused, not
// created.
func TestCallSaysWhyAPluginDoesNotRun(t *testing.T) {
	c := conformanceCLI(t)
	src := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	if _, errOut, code := c.run("plugin", "disable", "wordcount", "--reason", "too chatty"); code != 0 {
		t.Fatalf("disable: %s", errOut)
	}
	project := t.TempDir()
	_, errOut, code := c.run("plugin", "call", "wordcount", "text.count", `{"path":"a"}`, "--project", project)
	if code == 0 || !strings.Contains(errOut, "wordcount is disabled") || !strings.Contains(errOut, "too chatty") || !strings.Contains(errOut, "plugin enable wordcount") {
		t.Fatalf("call of a disabled plugin: %d\n%s", code, errOut)
	}
	_, errOut, code = c.run("plugin", "call", "nosuch", "x.y", "{}", "--project", project)
	if code == 0 || !strings.Contains(errOut, "no plugin named nosuch is installed") {
		t.Fatalf("call of an unknown plugin: %d\n%s", code, errOut)
	}

	missing := filepath.Join(t.TempDir(), "typo")
	_, errOut, code = c.run("plugin", "call", "wordcount", "text.count", "{}", "--project", missing)
	if code == 0 || !strings.Contains(errOut, "PROJECT_NOT_FOUND") {
		t.Fatalf("missing project: %d\n%s", code, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("plugin call created the mistyped project directory")
	}
}
