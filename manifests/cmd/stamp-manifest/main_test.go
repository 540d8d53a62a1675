package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/manifests"
)

const src = `# demo plugin
name: demo
version: "1.0.0"
kind: vcs
description: "demo"
author: "me"
entry: demo
sha256: ""   # stamped by make build
api_versions: [1]
`

func TestRun(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "demo")
	if err := os.WriteFile(bin, []byte("a real file standing in for a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "src.yaml")
	os.WriteFile(in, []byte(src), 0o644)
	out := filepath.Join(dir, manifests.FileName)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-in", in, "-bin", bin, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	m, err := manifests.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyChecksum(); err != nil {
		t.Fatalf("stamped manifest does not match its binary: %v", err)
	}
	got, _ := os.ReadFile(out)
	if !strings.Contains(string(got), "# stamped by make build") || !strings.HasPrefix(string(got), "# demo plugin\n") {
		t.Errorf("comments lost:\n%s", got)
	}
	if orig, _ := os.ReadFile(in); string(orig) != src {
		t.Error("-in was modified although -out was given")
	}

	// A different binary than the one entry points at is refused.
	other := filepath.Join(t.TempDir(), "other")
	os.WriteFile(other, []byte("another binary"), 0o755)
	stderr.Reset()
	if code := run([]string{"-in", in, "-bin", other, "-out", out}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), manifests.CodeChecksumMismatch) {
		t.Errorf("wrong binary: exit %d, stderr %s", code, stderr.String())
	}

	// In place, with the entry absent next to the manifest (source tree).
	srcDir := t.TempDir()
	inPlace := filepath.Join(srcDir, manifests.FileName)
	os.WriteFile(inPlace, []byte(src), 0o644)
	if code := run([]string{"-in", inPlace, "-bin", bin}, &stdout, &stderr); code != 0 {
		t.Errorf("in place: exit %d: %s", code, stderr.String())
	}

	// An invalid manifest fails with its problems listed.
	broken := filepath.Join(t.TempDir(), manifests.FileName)
	os.WriteFile(broken, []byte(strings.Replace(src, "kind: vcs", "kind: vsc", 1)), 0o644)
	stderr.Reset()
	if code := run([]string{"-in", broken, "-bin", bin}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "MANIFEST_INVALID") || !strings.Contains(stderr.String(), `did you mean "vcs"`) {
		t.Errorf("broken manifest: exit %d, stderr %s", code, stderr.String())
	}
	if b, _ := os.ReadFile(broken); strings.Contains(string(b), "sha256: \"") && !strings.Contains(string(b), `sha256: ""`) {
		t.Error("broken manifest was rewritten")
	}

	for _, args := range [][]string{{}, {"-in", in}, {"-bin", bin}, {"-in", in, "-bin", bin, "extra"}, {"-nope"}} {
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
	if code := run([]string{"-in", filepath.Join(dir, "missing.yaml"), "-bin", bin}, &stdout, &stderr); code != 1 {
		t.Errorf("missing -in: exit %d", code)
	}
}
