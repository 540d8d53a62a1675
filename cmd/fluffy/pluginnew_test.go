package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// TestPluginNewEndToEnd: a third-party plugin
// made by `fluffy plugin new` outside the repository, with the SDK through
// the generated go.mod's replace directive, passes its own tests (the SDK's
// test kit, schema vs plugin.yaml included), builds and stamps with the
// generated Makefile, installs (certified in its L2 sandbox) and runs
// through `fluffy plugin call`. A dynamically linked build of it is refused
// before anything launches, with the static build as the fix.
func TestPluginNewEndToEnd(t *testing.T) {
	c := dockerCLI(t)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hello-greeter")
	out, errOut, code := c.run("plugin", "new", "hello-greeter", "--dir", dir, "--sdk", repo)
	if code != 0 {
		t.Fatalf("plugin new: %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"main.go", "main_test.go", "plugin.yaml", "Makefile", "go.mod"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("plugin new did not write %s: %v", f, err)
		}
	}
	if _, _, code := c.run("plugin", "new", "hello-greeter", "--dir", dir, "--sdk", repo); code == 0 {
		t.Fatal("plugin new overwrote a non-empty directory")
	}
	fluffy := testbin.Build(t, "cmd/fluffy")
	sh := func(env []string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	// The author's loop, as the generated Makefile runs it.
	if o, err := sh(nil, "make", "FLUFFY="+fluffy, "test"); err != nil {
		t.Fatalf("make test: %v\n%s", err, o)
	}
	if o, err := sh(nil, "make", "FLUFFY="+fluffy); err != nil {
		t.Fatalf("make: %v\n%s", err, o)
	}
	m, err := manifests.Load(filepath.Join(dir, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyChecksum(); err != nil {
		t.Fatalf("make did not stamp the built binary: %v", err)
	}
	out, errOut, code = c.run("plugin", "install", dir, "--yes")
	if code != 0 {
		t.Fatalf("install: %d\n%s%s", code, out, errOut)
	}
	out, _, _ = c.run("plugin", "info", "hello-greeter")
	if !strings.Contains(out, "Certification: PASSED") {
		t.Fatalf("not certified:\n%s", out)
	}
	project := t.TempDir()
	os.Chmod(project, 0o755)
	os.WriteFile(filepath.Join(project, "notes.txt"), []byte("a\nb\nc\n"), 0o644)
	out, errOut, code = c.run("plugin", "call", "hello-greeter", "hello_greeter.lines", `{"path":"notes.txt"}`, "--project", project)
	if code != 0 || !strings.Contains(strings.ReplaceAll(out, " ", ""), `"lines":3`) {
		t.Fatalf("call: %d\n%s%s", code, out, errOut)
	}
	// The kernel checks the arguments against plugin.yaml's schema.
	if _, errOut, code = c.run("plugin", "call", "hello-greeter", "hello_greeter.lines", `{"path":5}`, "--project", project); code != 1 || !strings.Contains(errOut, "TOOL_ARGS_INVALID") {
		t.Fatalf("bad arguments reached the plugin: %d %s", code, errOut)
	}

	// The dev loop: an edit, one command, and the next call runs it —
	// approved and certified like any install.
	src, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	edited := strings.Replace(string(src), "Lines: bytes.Count(", "Lines: 1000 + bytes.Count(", 1)
	if edited == string(src) {
		t.Fatal("template changed: cannot edit the handler")
	}
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(edited), 0o644)
	if _, errOut, code := c.run("plugin", "dev", dir); code == 0 || !strings.Contains(errOut, "REGISTRY_NOT_CONFIRMED") {
		t.Fatalf("plugin dev without approval: %d %s", code, errOut)
	}
	if out, errOut, code := c.run("plugin", "dev", dir, "--yes"); code != 0 {
		t.Fatalf("plugin dev: %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = c.run("plugin", "call", "hello-greeter", "hello_greeter.lines", `{"path":"notes.txt"}`, "--project", project)
	if code != 0 || !strings.Contains(strings.ReplaceAll(out, " ", ""), `"lines":1003`) {
		t.Fatalf("call after plugin dev: %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := c.run("plugin", "info", "hello-greeter"); !strings.Contains(out, "Certification: PASSED") {
		t.Fatalf("the dev build is not certified:\n%s", out)
	}

	// cgo on (the go default with a C compiler): dynamically linked.
	if _, err := exec.LookPath("gcc"); err != nil {
		return
	}
	if o, err := sh([]string{"CGO_ENABLED=1"}, "go", "build", "-o", "hello-greeter", "."); err != nil {
		t.Fatalf("cgo build: %v\n%s", err, o)
	}
	_, errOut, code = c.run("plugin", "stamp", dir)
	if code == 0 || !strings.Contains(errOut, "dynamically linked") || !strings.Contains(errOut, "CGO_ENABLED=0") {
		t.Fatalf("stamp of a dynamic binary: %d %s", code, errOut)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "plugin.yaml"))
	sum, _ := manifests.FileSHA256(filepath.Join(dir, "hello-greeter"))
	data, _ = manifests.StampSHA256(data, sum)
	os.WriteFile(filepath.Join(dir, "plugin.yaml"), data, 0o644)
	_, errOut, code = c.run("plugin", "install", dir, "--yes", "--force")
	if code == 0 || !strings.Contains(errOut, "PLUGIN_BINARY_NOT_RUNNABLE") || !strings.Contains(errOut, "CGO_ENABLED=0") {
		t.Fatalf("install of a dynamic binary: %d %s", code, errOut)
	}
}
