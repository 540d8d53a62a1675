package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
)

// brokenPlugin lays out the conformance suite's broken fixture under name
// (its personality), with a manifest declaring the fixture's tools.
func brokenPlugin(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	y := "name: " + name + `
version: 1.0.0
kind: tool
description: conformance fixture
author: fluffy tests
entry: ` + name + `
sha256: "` + strings.Repeat("0", 64) + `"
api_versions: [1, 2]
tags: [third_party]
tools:
  - name: fx.read
    summary: "read a project file"
    parameters: {type: object, properties: {path: {type: string, minLength: 1}}, required: [path], additionalProperties: false}
    output_mode: full
  - name: fx.write
    summary: "propose a file's new content"
    parameters: {type: object, properties: {path: {type: string, minLength: 1}, content: {type: string}}, required: [path, content], additionalProperties: false}
    output_mode: patch
`
	if err := os.WriteFile(filepath.Join(dir, "src.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	// buildPlugin names the binary after the manifest's entry.
	return buildPlugin(t, "../../internal/fixtures/any-broken", filepath.Join(dir, "src.yaml"))
}

// plainCLI certifies plugins as plain processes (FLUFFY_SANDBOX=none): the
// sandbox items are not checked, so nothing it certifies passes.
func plainCLI(t *testing.T) *cli {
	c := newCLI(t)
	c.vars["FLUFFY_SANDBOX"] = "none"
	c.vars["FLUFFY_CONFORMANCE_STUB_KERNEL"] = testbin.Build(t, "conformance/cmd/stubkernel")
	return c
}

// conformanceCLI certifies plugins in their L2 containers, as a user's
// fluffy does (runtime-docker built from this checkout). Without Docker it
// skips, unless FLUFFY_REQUIRE_DOCKER is set.
func conformanceCLI(t *testing.T) *cli {
	t.Helper()
	if _, err := os.Stat("/var/run/docker.sock"); err != nil && os.Getenv("DOCKER_HOST") == "" {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but there is no Docker socket: %v", err)
		}
		t.Skip("Docker is not available: certification runs in the L2 sandbox")
	}
	c := newCLI(t)
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	c.home = home
	c.vars["FLUFFY_RUNTIME_ADAPTER"] = testbin.Build(t, "builtin-plugins/runtime-docker")
	c.vars["DOCKER_HOST"] = os.Getenv("DOCKER_HOST")
	return c
}

func TestConformanceList(t *testing.T) {
	c := newCLI(t)
	out, _, code := c.run("conformance", "list")
	if code != 0 || !strings.Contains(out, "CORE-HANDSHAKE-001") || !strings.Contains(out, "TOOL-PATH-001") || !strings.Contains(out, "seed 000") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	out, _, code = c.run("conformance", "list", "--profile", "policy", "--json")
	var items []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &items) != nil || len(items) != 3 {
		t.Fatalf("list --json: %d %s", code, out)
	}
}

func TestConformanceRunReportsAndExitCode(t *testing.T) {
	c := conformanceCLI(t)
	good := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	js, ju := filepath.Join(t.TempDir(), "r.json"), filepath.Join(t.TempDir(), "r.xml")
	out, errOut, code := c.run("conformance", "run", good, "--json", js, "--junit", ju)
	if code != 0 || !strings.Contains(out, "PASSED") || !strings.Contains(out, "PASS  CORE-SHUTDOWN-002") {
		t.Fatalf("run wordcount: %d\n%s\n%s", code, out, errOut)
	}
	var rep struct {
		Plugin  string `json:"plugin"`
		Results []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &rep) != nil || rep.Plugin != "wordcount" || len(rep.Results) < 20 {
		t.Fatalf("json report: %v %+v", err, rep)
	}
	var x struct {
		XMLName xml.Name
	}
	if b, err := os.ReadFile(ju); err != nil || xml.Unmarshal(b, &x) != nil || x.XMLName.Local != "testsuites" {
		t.Fatalf("junit report: %v", err)
	}

	// In its container a path escape or a workspace write is prevented,
	// not observed; a patch that is not a diff fails there too.
	bad := brokenPlugin(t, "tool-badpatch")
	out, errOut, code = c.run("conformance", "run", bad)
	if code != 1 || !strings.Contains(out, "FAIL  TOOL-PATCH-001") || !strings.Contains(errOut, "CONFORMANCE_FAILED") {
		t.Fatalf("run broken: %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := c.run("conformance", "run", bad, "--profile", "nope"); code == 0 || !strings.Contains(errOut, "CONFORMANCE_UNKNOWN_PROFILE") {
		t.Fatalf("bad profile: %d %s", code, errOut)
	}
}

// A skipped MUST item means "not certified": without the
// sandbox the sandbox items are not checked, and the text, the JUnit
// report and the exit code all say so.
func TestConformanceRunWithoutSandboxIsNotCertified(t *testing.T) {
	c := plainCLI(t)
	good := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	ju := filepath.Join(t.TempDir(), "r.xml")
	out, errOut, code := c.run("conformance", "run", good, "--junit", ju)
	if code != 1 || !strings.Contains(out, "SKIP  CORE-SANDBOX-001") || !strings.Contains(out, "NOT CERTIFIED (MUST not checked: CORE-SANDBOX-001, CORE-SANDBOX-002)") || !strings.Contains(errOut, "CONFORMANCE_NOT_CERTIFIED") {
		t.Fatalf("run without the sandbox: %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(ju)
	if err != nil || !strings.Contains(string(b), `type="MUST not checked"`) {
		t.Fatalf("JUnit does not fail the skipped MUST items: %v\n%s", err, b)
	}
}

// A weaker run never replaces a stronger certification: after
// install (core+tool), a `--profile core` run is recorded beside it and
// `plugin info` shows both.
func TestCertificationPerProfile(t *testing.T) {
	c := conformanceCLI(t)
	good := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	if _, errOut, code := c.run("plugin", "install", good, "--yes"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	if out, errOut, code := c.run("conformance", "run", good, "--profile", "core"); code != 0 || !strings.Contains(out, "certification recorded") {
		t.Fatalf("core run: %d\n%s\n%s", code, out, errOut)
	}
	out, _, _ := c.run("plugin", "info", "wordcount", "--json")
	var vs []registry.Record
	if err := json.Unmarshal([]byte(out), &vs); err != nil || len(vs) != 1 {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	rec := vs[0]
	if rec.Certification == nil || strings.Join(rec.Certification.Profiles, "+") != "core+tool" || len(rec.Certifications) != 2 {
		t.Fatalf("the core-only run replaced the core+tool certification: %+v\nall: %+v", rec.Certification, rec.Certifications)
	}
	out, _, _ = c.run("plugin", "info", "wordcount")
	if !strings.Contains(out, "profiles core+tool") || !strings.Contains(out, "also: PASSED — suite") || !strings.Contains(out, "profiles core,") {
		t.Fatalf("info does not show both certifications:\n%s", out)
	}
	out, _, _ = c.run("plugin", "list")
	if !strings.Contains(out, "core+tool") {
		t.Fatalf("list does not say which profiles are certified:\n%s", out)
	}
}

// install runs the suite: a third-party plugin failing a MUST is refused;
// --force installs it with the failure recorded as forced; info shows it.
func TestInstallCertifies(t *testing.T) {
	c := conformanceCLI(t)
	bad := brokenPlugin(t, "tool-badpatch")
	_, errOut, code := c.run("plugin", "install", bad, "--yes")
	if code == 0 || !strings.Contains(errOut, "REGISTRY_CERTIFICATION_FAILED") || !strings.Contains(errOut, "TOOL-PATCH-001") {
		t.Fatalf("install broken: %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(c.home, "plugins", "tool-badpatch")); err == nil {
		t.Fatal("refused plugin was stored")
	}
	out, errOut, code := c.run("plugin", "install", bad, "--yes", "--force", "--json")
	var rec registry.Record
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Certification == nil || !rec.Certification.Forced || rec.Certification.Passed {
		t.Fatalf("forced install: %d\n%s\n%s", code, out, errOut)
	}
	if len(rec.Certification.Failed) != 1 || rec.Certification.Failed[0] != "TOOL-PATCH-001" || rec.Certification.SHA256 != rec.SHA256 {
		t.Fatalf("certification: %+v", rec.Certification)
	}
	out, _, _ = c.run("plugin", "info", "tool-badpatch")
	if !strings.Contains(out, "Certification:") || !strings.Contains(out, "TOOL-PATCH-001") {
		t.Fatalf("info: %s", out)
	}

	good := buildPlugin(t, "../../pluginsdk/examples/wordcount", "../../pluginsdk/examples/wordcount/plugin.yaml")
	out, errOut, code = c.run("plugin", "install", good, "--yes", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Certification == nil || !rec.Certification.Passed || rec.Certification.SuiteVersion == "" {
		t.Fatalf("install good: %d\n%s\n%s", code, out, errOut)
	}
	// A later run of the suite refreshes the record of the installed binary.
	out, _, code = c.run("conformance", "run", good)
	if code != 0 || !strings.Contains(out, "certification recorded for installed wordcount@1.0.0") {
		t.Fatalf("run on installed plugin: %d\n%s", code, out)
	}
}
