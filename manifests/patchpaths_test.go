package manifests

import (
	"fmt"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

const patchManifest = `name: demo
version: 0.1.0
kind: tool
description: "demo"
author: t
entry: demo
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
required_capabilities: [fs.write]
tools:
  - name: demo.patch
    summary: "apply a patch"
    parameters: {type: object, properties: {patch: {type: string}}, required: [patch], additionalProperties: false}
    paths: [{arg: patch, access: write, format: patch}]
`

// TestPatchPathArgs: every path a patch argument adds, updates, deletes or
// moves to is a write path the router judges; a patch that does not parse
// is refused before the call.
func TestPatchPathArgs(t *testing.T) {
	m, err := Parse("plugin.yaml", []byte(patchManifest))
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := m.Tool("demo.patch")
	env := "*** Begin Patch\n*** Update File: src/a.go\n*** Move to: src/b.go\n@@\n-x\n+y\n*** Add File: tests/a_test.go\n+t\n*** Delete File: .env\n*** End Patch\n"
	uni := "--- a/src/a.go\n+++ b/src/a.go\n@@ -1 +1 @@\n-x\n+y\n--- /dev/null\n+++ b/src/c.go\n@@ -0,0 +1 @@\n+z\n"
	for _, c := range []struct {
		name, patch, want, code string
	}{
		{"envelope", env, "[{patch src/a.go fs.write true false} {patch src/b.go fs.write true false} {patch tests/a_test.go fs.write true false} {patch .env fs.write true false}]", ""},
		{"unified", uni, "[{patch src/a.go fs.write true false} {patch src/c.go fs.write true false}]", ""},
		{"not-a-patch", "change a.go please", "", CodeToolArgsInvalid},
	} {
		args := fmt.Sprintf(`{"patch":%q}`, c.patch)
		got, err := tl.PathArgs([]byte(args))
		if c.code != "" {
			if !uerr.HasCode(err, c.code) {
				t.Errorf("%s: err %v, want %s", c.name, err, c.code)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("%s: got %v %v\nwant %s", c.name, got, err, c.want)
		}
	}
	bad := patchManifest[:len(patchManifest)-len("format: patch}]\n")] + "format: diff}]\n"
	if _, err := Parse("plugin.yaml", []byte(bad)); !HasCode(err, CodeBadPathDecl) {
		t.Errorf("an unknown format was accepted: %v", err)
	}
}
