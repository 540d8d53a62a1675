package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
)

const markerManifest = `name: markerplugin
version: 1.0.0
kind: tool
description: "writes a marker file when it runs"
author: tests
entry: markerplugin
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
tools:
  - name: mark.echo
    summary: "echo the arguments"
    parameters: {type: object}
`

// markerPlugin builds the hostile fixture with marker baked in and lays it
// out as an installable plugin directory.
func markerPlugin(t *testing.T, marker string) string {
	t.Helper()
	dir := t.TempDir()
	bin := testbin.Into(t, "internal/fixtures/tool-marker", filepath.Join(dir, "markerplugin"), testbin.LDFlags("-X main.marker="+marker))
	sum, err := manifests.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	stamped, err := manifests.StampSHA256([]byte(markerManifest), sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ran(marker string) bool {
	_, err := os.Stat(marker)
	return err == nil
}

// TestNothingRunsBeforeConsent: a third-party plugin's code
// does not execute before the user approved it, even when certification
// would run it as a plain process (--sandbox=none). On the old code the
// suite ran it first and asked afterwards.
func TestNothingRunsBeforeConsent(t *testing.T) {
	c := plainCLI(t) // FLUFFY_SANDBOX=none: any run would land on the host
	marker := filepath.Join(t.TempDir(), "marker")
	src := markerPlugin(t, marker)

	_, errOut, code := c.runIn("n\n", true, "plugin", "install", src)
	if code == 0 || !strings.Contains(errOut, "declined") || !strings.Contains(errOut, "Install this plugin?") {
		t.Fatalf("answering no: %d\n%s", code, errOut)
	}
	for _, want := range []string{"sha256:", "capabilities:", "sandbox:", "network hosts:", "markerplugin@1.0.0"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the consent screen lacks %q:\n%s", want, errOut)
		}
	}
	if ran(marker) {
		t.Fatal("the plugin ran although the user answered no")
	}

	_, errOut, code = c.run("plugin", "install", src)
	if code == 0 || !strings.Contains(errOut, "no terminal to ask; pass --yes to approve") || strings.Contains(errOut, "answered no") {
		t.Fatalf("no terminal: %d\n%s", code, errOut)
	}
	if ran(marker) {
		t.Fatal("the plugin ran without approval (no terminal)")
	}

	// The control: approved and run as a plain process (the user's
	// explicit --sandbox=none), it does run on the host; the sandbox items
	// are not checked, so it is not certified and not installed.
	_, errOut, code = c.runIn("y\n", true, "plugin", "install", src, "--sandbox=none")
	if code == 0 || !ran(marker) || !strings.Contains(errOut, "plain process with your privileges") || !strings.Contains(errOut, "MUST items not checked: CORE-SANDBOX-001, CORE-SANDBOX-002") {
		t.Fatalf("approved with --sandbox=none: code %d, ran %v\n%s", code, ran(marker), errOut)
	}
}

// TestCertificationRunsOnlyInTheSandbox: approved, the plugin
// is certified in its L2 container: every item there, the marker is never
// written on the host.
func TestCertificationRunsOnlyInTheSandbox(t *testing.T) {
	c := conformanceCLI(t)
	marker := filepath.Join(t.TempDir(), "marker")
	src := markerPlugin(t, marker)

	out, errOut, code := c.run("plugin", "install", src, "--yes", "--json")
	if ran(marker) {
		t.Fatalf("certification ran the plugin on the host:\n%s", errOut)
	}
	if !strings.Contains(errOut, "in the plugin's sandbox") {
		t.Fatalf("certification did not run: %d\n%s\n%s", code, out, errOut)
	}
	if code != 0 || !strings.Contains(out, `"passed": true`) {
		t.Fatalf("install: %d\n%s\n%s", code, out, errOut)
	}
	// Without the container runtime it refuses instead of running the plugin
	// on the host.
	c.vars["FLUFFY_RUNTIME_ADAPTER"] = filepath.Join(t.TempDir(), "missing")
	c.vars["DOCKER_HOST"] = "unix:///nonexistent.sock"
	_, errOut, code = c.run("plugin", "install", src, "--yes", "--force")
	if code == 0 || !strings.Contains(errOut, "CONFORMANCE_SANDBOX") || ran(marker) {
		t.Fatalf("no runtime: %d ran=%v\n%s", code, ran(marker), errOut)
	}
}

// TestInfoShowsTampering: a stored binary swapped and its
// stored manifest re-stamped does not run, and `plugin info` says so
// instead of showing the old hash and "certification PASSED" alone.
func TestInfoShowsTampering(t *testing.T) {
	c := conformanceCLI(t)
	marker := filepath.Join(t.TempDir(), "marker")
	src := markerPlugin(t, marker)
	if _, errOut, code := c.run("plugin", "install", src, "--yes"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	out, _, _ := c.run("plugin", "info", "markerplugin")
	if !strings.Contains(out, "Integrity:     ok") || !strings.Contains(out, "Certification: PASSED —") {
		t.Fatalf("info before tampering:\n%s", out)
	}
	stored := filepath.Join(c.home, "plugins", "markerplugin", "1.0.0")
	evil := markerPlugin(t, marker+".evil")
	b, _ := os.ReadFile(filepath.Join(evil, "markerplugin"))
	if err := os.WriteFile(filepath.Join(stored, "markerplugin"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	mf, _ := os.ReadFile(filepath.Join(evil, "plugin.yaml"))
	if err := os.WriteFile(filepath.Join(stored, "plugin.yaml"), mf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, _ = c.run("plugin", "info", "markerplugin")
	if !strings.Contains(out, "Integrity:     MISMATCH") || !strings.Contains(out, "not for what is stored now") {
		t.Fatalf("info after tampering:\n%s", out)
	}
	_, errOut, code := c.run("plugin", "call", "markerplugin", "mark.echo", "{}", "--project", t.TempDir())
	if code == 0 || ran(marker+".evil") {
		t.Fatalf("call after tampering: code %d, evil ran %v\n%s", code, ran(marker+".evil"), errOut)
	}
	t.Logf("call refused: %s", errOut)
}
