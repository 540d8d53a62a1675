package kernel

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/sandbox"
)

// fakePython lays out what venvToolchains recognises as a Python
// installation: bin/python3.11 and lib/python3.11/os.py.
func fakePython(t *testing.T, prefix string, stdlib bool) {
	t.Helper()
	files := map[string]string{"bin/python3.11": "#!/bin/false\n"}
	if stdlib {
		files["lib/python3.11/os.py"] = ""
	}
	for f, c := range files {
		p := filepath.Join(prefix, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVenvToolchains: the interpreter a project's venv was made from is
// mounted when it is a Python installation outside the project, the
// home and the mounted toolchains — whatever pyvenv.cfg claims.
func TestVenvToolchains(t *testing.T) {
	// Outside /tmp, which toolchains may not be.
	base, err := os.MkdirTemp("/var/tmp", "fluffy-venv-tc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	py := filepath.Join(base, "pyenv", "versions", "3.11.7")
	fakePython(t, py, true)
	notPy := filepath.Join(base, "secrets")
	fakePython(t, notPy, false)
	cases := []struct {
		name     string
		cfg      string // pyvenv.cfg
		link     string // .venv/bin/python's target, "" for none
		inside   bool   // the installation is inside the project
		sub      string // the venv's directory in the project, "" for the root
		userHome string
		have     []sandbox.Toolchain
		want     []string
	}{
		{name: "venv linking to a pyenv python", cfg: "home = " + py + "/bin\n", link: py + "/bin/python3.11", want: []string{py}},
		{name: "venv of a top-level directory", sub: "svc", cfg: "home = " + py + "/bin\n", link: py + "/bin/python3.11", want: []string{py}},
		{name: "pyvenv.cfg executable alone", cfg: "executable = " + py + "/bin/python3.11\n", want: []string{py}},
		{name: "not a python installation", cfg: "home = " + notPy + "/bin\n", link: notPy + "/bin/python3.11"},
		{name: "already mounted", cfg: "home = " + py + "/bin\n", have: []sandbox.Toolchain{{Path: filepath.Join(base, "pyenv")}}},
		{name: "above the user's home", cfg: "home = " + py + "/bin\n", userHome: filepath.Join(py, "home", "u")},
		{name: "inside the project", inside: true},
		{name: "no pyvenv.cfg"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			project := filepath.Join(base, "p", string(rune('a'+i)))
			venv := filepath.Join(project, c.sub, ".venv")
			if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := c.cfg
			if c.inside {
				fakePython(t, filepath.Join(project, "py"), true)
				cfg = "home = " + filepath.Join(project, "py", "bin") + "\n"
			}
			if cfg != "" {
				if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.link != "" {
				if err := os.Symlink(c.link, filepath.Join(venv, "bin", "python")); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, tc := range venvToolchains(project, filepath.Join(base, "fluffy-home"), c.userHome, "", c.have, hclog.NewNullLogger()) {
				got = append(got, tc.Path)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("mounted %v, want %v", got, c.want)
			}
		})
	}
}

// TestNodeToolchain: the node the kernel's PATH finds is mounted when it
// is a node installation outside the mounted toolchains, the project and
// the home directories.
func TestNodeToolchain(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "fluffy-node-tc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	mk := func(prefix string, installed bool) string {
		if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(prefix, "bin", "node"), []byte("#!/bin/false\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if installed {
			if err := os.MkdirAll(filepath.Join(prefix, "lib", "node_modules"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(prefix, "bin")
	}
	nvm := mk(filepath.Join(base, "nvm", "versions", "node", "v22.1.0"), true)
	stray := mk(filepath.Join(base, "stray"), false)
	// fnm-style: PATH holds a directory of links to the installation.
	shim := filepath.Join(base, "shim")
	if err := os.MkdirAll(shim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(nvm, "node"), filepath.Join(shim, "node")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		have       []sandbox.Toolchain
		want       string
	}{
		{"nvm's node first on PATH", nvm + ":/usr/bin", nil, filepath.Dir(nvm)},
		{"through a link", shim + ":/usr/bin", nil, filepath.Dir(nvm)},
		{"not an installation", stray + ":" + nvm, nil, ""},
		{"inside a mounted toolchain", nvm, []sandbox.Toolchain{{Path: base}}, ""},
		{"no node", filepath.Join(base, "none"), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc, ok := nodeToolchain(c.path, filepath.Join(base, "project"), filepath.Join(base, "fluffy-home"), "", "", c.have, hclog.NewNullLogger())
			if got := map[bool]string{true: tc.Path}[ok]; got != c.want || ok && tc.Env != EnvUserNode {
				t.Fatalf("mounted %q (%+v), want %q", got, tc, c.want)
			}
		})
	}
}
