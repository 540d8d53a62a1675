package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// nodeInstall makes a node installation outside /usr and /tmp, laid out
// as nvm's or a release tarball's (bin/node, lib/node_modules), with the
// system's node binary in it (linked when the filesystem allows, else
// copied).
func nodeInstall(t *testing.T) (prefix string) {
	t.Helper()
	sys, err := filepath.EvalSymlinks("/usr/bin/node")
	if err != nil {
		t.Fatalf("node (Debian's nodejs package) is needed: %v", err)
	}
	prefix, err = os.MkdirTemp("/var/tmp", "fluffy-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prefix) })
	_ = os.Chmod(prefix, 0o755)
	for _, d := range []string{"bin", "lib/node_modules"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(prefix, "bin", "node")
	if os.Link(sys, exe) == nil {
		return prefix
	}
	src, err := os.Open(sys)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// TestNodeFromUserPathInDockerSandbox: with a node installation first on
// the user's PATH (as nvm puts it), node --test runs that node inside the
// L2 sandbox — the test checks its own process.execPath — and the summary
// says so.
func TestNodeFromUserPathInDockerSandbox(t *testing.T) {
	prefix := nodeInstall(t)
	node := filepath.Join(prefix, "bin", "node")
	t.Setenv("PATH", filepath.Join(prefix, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	files := map[string]string{
		"package.json":  `{"name":"usernode","version":"1.0.0"}`,
		"which.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\ntest('runs the user node', () => { assert.strictEqual(process.execPath, " + `"` + node + `"` + "); });\n",
		"lib/helper.js": "exports.answer = () => require('left-pad-lite')();\n",
		"node_modules/left-pad-lite/package.json": `{"name":"left-pad-lite","main":"index.js"}`,
		"node_modules/left-pad-lite/index.js":     "module.exports = () => 42;\n",
		"deps.test.js":                            "const test = require('node:test');\nconst assert = require('node:assert');\ntest('node_modules', () => { assert.strictEqual(require('./lib/helper').answer(), 42); });\n",
	}
	for f, c := range files {
		p := filepath.Join(ws, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := kerneltest.Start(t, ws, kerneltest.Options{}, pluginPkg)
	res := e.Call(t, "tool-test", "test.run", "usernode", `{}`)
	if !res.OK {
		t.Fatalf("test.run: %+v", res.Err)
	}
	r, err := testrun.Decode(res.Output)
	if err != nil {
		t.Fatalf("kernel refuses the output %s: %v", res.Output, err)
	}
	if r.Status != testrun.Green || r.Counts.Passed != 2 {
		t.Fatalf("status %s counts %+v\nsummary: %s\ntests: %+v", r.Status, r.Counts, r.Summary, r.Tests)
	}
	if !strings.Contains(r.Summary, "node: "+node+" (the node on the user's PATH)") {
		t.Errorf("summary %q does not say which node ran", r.Summary)
	}
}
