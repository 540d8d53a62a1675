package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// pythonInstall makes a Python installation outside /usr and /tmp, as
// pyenv or uv have one: a real interpreter (a copy of the system's) in
// its own bin/, its standard library under lib/. It is removed after the
// test.
func pythonInstall(t *testing.T) (prefix, exe string) {
	t.Helper()
	sys, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatalf("python3 (Debian's python3 package) is needed: %v", err)
	}
	ver := strings.TrimPrefix(filepath.Base(sys), "python") // 3.11
	prefix, err = os.MkdirTemp("/var/tmp", "fluffy-python-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prefix) })
	_ = os.Chmod(prefix, 0o755)
	exe = filepath.Join(prefix, "bin", "python"+ver)
	if err := os.MkdirAll(filepath.Join(prefix, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
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
	dst.Close()
	// The standard library and Debian's dist-packages (pytest) by link.
	for _, l := range []string{"python" + ver, "python3"} {
		if err := os.Symlink("/usr/lib/"+l, filepath.Join(prefix, "lib", l)); err != nil {
			t.Fatal(err)
		}
	}
	return prefix, exe
}

// writeVenvFixtures makes two projects with a real virtualenv each, made
// by the installation's own `python -m venv`:
//   - pyvenv: --system-site-packages (pytest comes from the base), and a
//     package only the venv's site-packages has, which the test imports;
//   - pyvenvnopytest: an isolated venv without pytest.
func writeVenvFixtures(t *testing.T, ws, exe string) {
	t.Helper()
	for name, flags := range map[string][]string{"pyvenv": {"--system-site-packages"}, "pyvenvnopytest": nil} {
		dir := filepath.Join(ws, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-m", "venv", "--without-pip"}, flags...)
		if out, err := exec.Command(exe, append(args, filepath.Join(dir, ".venv"))...).CombinedOutput(); err != nil {
			t.Fatalf("python -m venv: %v\n%s", err, out)
		}
		site, _ := filepath.Glob(filepath.Join(dir, ".venv", "lib", "python3*", "site-packages"))
		if len(site) != 1 {
			t.Fatalf("venv site-packages: %v", site)
		}
		files := map[string]string{
			filepath.Join(site[0], "kata_helper.py"): "def answer():\n    return 42\n",
			filepath.Join(dir, "test_env.py"):        "import sys\n\nimport kata_helper\n\n\ndef test_venv():\n    assert kata_helper.answer() == 42\n    assert sys.prefix != sys.base_prefix\n",
		}
		for p, c := range files {
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type venvCase struct {
	path   string
	status testrun.Status
	says   []string // substrings of the summary
}

func venvCases(prefix string) []venvCase {
	return []venvCase{
		{"pyvenv", testrun.Green, []string{"virtualenv pyvenv/.venv", "interpreter " + prefix + "/bin/python3"}},
		{"pyvenvnopytest", testrun.RunnerError, []string{"No module named pytest", "pyvenvnopytest/.venv/bin/python -m pip install pytest", "virtualenv pyvenvnopytest/.venv"}},
	}
}

func checkVenv(t *testing.T, c venvCase, r testrun.Run) {
	t.Helper()
	if r.Status != c.status {
		t.Fatalf("status %s, want %s\nsummary: %s\nbuild errors: %+v\noutput: %s", r.Status, c.status, r.Summary, r.BuildErrors, r.Output)
	}
	for _, s := range c.says {
		if !strings.Contains(r.Summary, s) {
			t.Errorf("summary %q does not say %q", r.Summary, s)
		}
	}
}

// TestPytestUsesProjectVenvInProcess: pytest runs with the project's
// virtualenv (its site-packages, the interpreter it was made from), and a
// venv without pytest is a runner error in Python's own words.
func TestPytestUsesProjectVenvInProcess(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	prefix, exe := pythonInstall(t)
	ws := t.TempDir()
	writeVenvFixtures(t, ws, exe)
	for _, c := range venvCases(prefix) {
		t.Run(c.path, func(t *testing.T) {
			checkVenv(t, c, runInProcess(t, ws, t.TempDir(), `{"path":"`+c.path+`"}`))
		})
	}
}

// TestPytestUsesProjectVenvInDockerSandbox: the same through the kernel
// in a real L2 container, where the interpreter is there only because the
// kernel mounts the installation the venv was made from.
func TestPytestUsesProjectVenvInDockerSandbox(t *testing.T) {
	prefix, exe := pythonInstall(t)
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	writeVenvFixtures(t, ws, exe)
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	e := kerneltest.Start(t, ws, kerneltest.Options{}, pluginPkg)
	for i, c := range venvCases(prefix) {
		t.Run(c.path, func(t *testing.T) {
			res := e.Call(t, "tool-test", "test.run", fmt.Sprintf("venv%d", i), `{"path":"`+c.path+`"}`)
			if !res.OK {
				t.Fatalf("test.run: %+v", res.Err)
			}
			r, err := testrun.Decode(res.Output)
			if err != nil {
				t.Fatalf("kernel refuses the output %s: %v", res.Output, err)
			}
			checkVenv(t, c, r)
		})
	}
}
