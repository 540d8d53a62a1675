package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// test.python_venv names a virtualenv outside the project: it is mounted
// with the Python it was made from, announced to tool-test; a relative
// path, a directory that is no virtualenv, or one inside the project is a
// configuration error that says so.
func TestNamedVenvToolchains(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "fluffy-named-tc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	py := filepath.Join(base, "pyenv", "versions", "3.11.7")
	fakePython(t, py, true)
	project := filepath.Join(base, "project")
	mk := func(dir string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte("home = "+py+"/bin\nexecutable = "+py+"/bin/python3.11\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	poetry := mk(filepath.Join(base, "cache", "pypoetry", "virtualenvs", "kata-py3.11"))
	inside := mk(filepath.Join(project, "env"))
	plain := filepath.Join(base, "plain")
	os.MkdirAll(plain, 0o755)
	for _, c := range []struct {
		venv, err string
		want      []string
	}{
		{venv: poetry, want: []string{poetry + "=" + EnvPythonVenv, py + "="}},
		{venv: "cache/pypoetry/virtualenvs/kata", err: "not an absolute path"},
		{venv: plain, err: "no pyvenv.cfg"},
		{venv: inside, err: "inside the project"},
	} {
		tcs, err := namedVenvToolchains(c.venv, project, filepath.Join(base, "fluffy-home"), "", "", nil, hclog.NewNullLogger())
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%s: error %v, want %q", c.venv, err, c.err)
			}
			continue
		}
		var got []string
		for _, tc := range tcs {
			got = append(got, tc.Path+"="+tc.Env)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Fatalf("%s: mounts %v, want %v (err %v)", c.venv, got, c.want, err)
		}
	}
}
