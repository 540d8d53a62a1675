package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// TestPytestUsesTheConfiguredVenvInDockerSandbox: a virtualenv outside the
// project (where poetry keeps them), named by test.python_venv, is what
// pytest runs with in a real L2 container: the kernel mounts it and the
// Python it was made from read-only, and its site-packages are used.
func TestPytestUsesTheConfiguredVenvInDockerSandbox(t *testing.T) {
	prefix, exe := pythonInstall(t)
	outside, err := os.MkdirTemp("/var/tmp", "fluffy-named-venv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	_ = os.Chmod(outside, 0o755)
	venv := filepath.Join(outside, "kata-py3.11")
	if out, err := exec.Command(exe, "-m", "venv", "--without-pip", "--system-site-packages", venv).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
	site, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(site) != 1 {
		t.Fatalf("venv site-packages: %v", site)
	}
	if err := os.WriteFile(filepath.Join(site[0], "kata_helper.py"), []byte("def answer():\n    return 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(outside, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	if err := os.WriteFile(filepath.Join(ws, "test_env.py"), []byte("import sys\n\nimport kata_helper\n\n\ndef test_venv():\n    assert kata_helper.answer() == 42\n    assert sys.prefix != sys.base_prefix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := kerneltest.Start(t, ws, kerneltest.Options{PythonVenv: venv}, pluginPkg)
	res := e.Call(t, "tool-test", "test.run", "named-venv", `{}`)
	if !res.OK {
		t.Fatalf("test.run: %+v", res.Err)
	}
	r, err := testrun.Decode(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	checkVenv(t, venvCase{status: testrun.Green, says: []string{"virtualenv " + venv, "interpreter " + prefix + "/bin/python3"}}, r)
}
