package plugintest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/manifests"
)

// Conformance stages the fresh build beside its manifest stamped with the
// build's own sha256, whether plugin.yaml is already stamped (with an older
// build's hash) or not yet (sha256: "", as `fluffy plugin new` writes it).
func TestStageStampsTheFreshBuild(t *testing.T) {
	const manifest = `name: demo
version: 1.0.0
kind: tool
description: "demo"
author: "me"
entry: bin/demo
sha256: SUM
api_versions: [1, 2]
sandbox: {template: code-executor}
tools:
  - name: demo.x
    summary: "do x"
    parameters: {type: object}
    output_mode: full
`
	for _, c := range []struct{ name, sum string }{
		{"unstamped", `""`},
		{"stamped by an older build", strings.Repeat("a", 64)},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			yml := filepath.Join(src, manifests.FileName)
			if err := os.WriteFile(yml, []byte(strings.Replace(manifest, "SUM", c.sum, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(src, "demo")
			if err := os.WriteFile(bin, []byte("the fresh build"), 0o755); err != nil {
				t.Fatal(err)
			}
			dir := stage(t, bin, yml)
			m, err := manifests.Load(filepath.Join(dir, manifests.FileName))
			if err != nil {
				t.Fatalf("staged manifest: %v", err)
			}
			if err := m.VerifyChecksum(); err != nil {
				t.Fatalf("staged binary does not match the staged sha256: %v", err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "bin", "demo")); err != nil || !bytes.Equal(got, []byte("the fresh build")) {
				t.Fatalf("staged entry: %q, %v", got, err)
			}
		})
	}
}
