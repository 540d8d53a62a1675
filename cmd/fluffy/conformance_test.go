package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/registry"
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
	return buildPlugin(t, "../../conformance/internal/fixtures/broken", filepath.Join(dir, "src.yaml"))
}

func conformanceCLI(t *testing.T) *cli {
	c := newCLI(t)
	c.vars["FLUFFY_SANDBOX"] = "none"
	c.vars["FLUFFY_CONFORMANCE_STUB_KERNEL"] = buildOnce(t, "../../conformance/cmd/stubkernel")
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

	bad := brokenPlugin(t, "tool-escape")
	out, errOut, code = c.run("conformance", "run", bad)
	if code != 1 || !strings.Contains(out, "FAIL  TOOL-PATH-001") || !strings.Contains(errOut, "CONFORMANCE_FAILED") {
		t.Fatalf("run broken: %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := c.run("conformance", "run", bad, "--profile", "nope"); code == 0 || !strings.Contains(errOut, "CONFORMANCE_UNKNOWN_PROFILE") {
		t.Fatalf("bad profile: %d %s", code, errOut)
	}
}

// install runs the suite: a third-party plugin failing a MUST is refused;
// --force installs it with the failure recorded as forced; info shows it.
func TestInstallCertifies(t *testing.T) {
	c := conformanceCLI(t)
	bad := brokenPlugin(t, "tool-wswrite")
	_, errOut, code := c.run("plugin", "install", bad, "--yes")
	if code == 0 || !strings.Contains(errOut, "REGISTRY_CERTIFICATION_FAILED") || !strings.Contains(errOut, "TOOL-WRITE-001") {
		t.Fatalf("install broken: %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(c.home, "plugins", "tool-wswrite")); err == nil {
		t.Fatal("refused plugin was stored")
	}
	out, errOut, code := c.run("plugin", "install", bad, "--yes", "--force", "--json")
	var rec registry.Record
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.Certification == nil || !rec.Certification.Forced || rec.Certification.Passed {
		t.Fatalf("forced install: %d\n%s\n%s", code, out, errOut)
	}
	if len(rec.Certification.Failed) != 1 || rec.Certification.Failed[0] != "TOOL-WRITE-001" || rec.Certification.SHA256 != rec.SHA256 {
		t.Fatalf("certification: %+v", rec.Certification)
	}
	out, _, _ = c.run("plugin", "info", "tool-wswrite")
	if !strings.Contains(out, "Certification:") || !strings.Contains(out, "TOOL-WRITE-001") {
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
