package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
)

// pyVenvNames are the project directories searched for a virtualenv
// (uv, poetry with virtualenvs.in-project, python -m venv), in order.
var pyVenvNames = []string{".venv", "venv"}

// envPythonVenv names the configured virtualenv's path in the sandbox
// (the kernel mounts it there read-only).
const envPythonVenv = "FLUFFY_PYTHON_VENV"

// pyEnv is the Python environment a pytest run uses.
type pyEnv struct {
	// python is the interpreter to run ("python3" from PATH without a venv).
	python string
	// venv is the project-relative virtualenv, "" for none.
	venv string
	// base is the interpreter the venv was made from (its pyvenv.cfg).
	base string
	// bin is put first on PATH ("" for none).
	bin string
	// env is what the run adds to its environment.
	env []string
}

// describe says which interpreter and environment ran, for the summary.
func (e pyEnv) describe() string {
	if e.venv == "" {
		return "python: " + e.python + " (no .venv or venv in the project)"
	}
	return fmt.Sprintf("python: the project's virtualenv %s (interpreter %s)", e.venv, e.base)
}

// findVenv returns the virtualenv governing target: a .venv/ or venv/
// with a pyvenv.cfg in target or a directory above it.
func findVenv(ws, target string) (string, bool) {
	for d := target; ; d = path.Dir(d) {
		for _, n := range pyVenvNames {
			rel := path.Join(d, n)
			if st, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(rel), "pyvenv.cfg")); err == nil && st.Mode().IsRegular() {
				return rel, true
			}
		}
		if d == "." || d == "/" {
			return "", false
		}
	}
}

// readPyvenvCfg parses pyvenv.cfg's "key = value" lines.
func readPyvenvCfg(file string) (map[string]string, []byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	if len(b) > 64<<10 {
		return nil, nil, fmt.Errorf("%s is larger than 64 KiB", file)
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg, b, nil
}

// pythonEnv picks the interpreter: without a virtualenv, python3 from the
// sandbox's PATH. With one, the venv as the sandbox can use it: the view
// has the venv's files but not its bin/python, a link out of the project
// to the interpreter it was made from (pyvenv.cfg's home, mounted
// read-only by the kernel). So the run gets a venv of its own in scratch:
// the same pyvenv.cfg, bin/python linking to that interpreter and lib
// linking to the project venv's lib — Python finds pyvenv.cfg beside its
// executable and takes site-packages (and .pth files) from there.
func (j *job) pythonEnv() (pyEnv, error) {
	venv, ok := findVenv(j.ws, j.target)
	vdir := filepath.Join(j.ws, filepath.FromSlash(venv))
	// A virtualenv the user's configuration names (test.python_venv) is
	// mounted read-only at its own path and wins over the project's.
	if named := os.Getenv(envPythonVenv); named != "" && filepath.IsAbs(named) {
		if st, err := os.Lstat(filepath.Join(named, "pyvenv.cfg")); err == nil && st.Mode().IsRegular() {
			venv, vdir, ok = named, named, true
		}
	}
	if !ok {
		return pyEnv{python: "python3"}, nil
	}
	cfg, raw, err := readPyvenvCfg(filepath.Join(vdir, "pyvenv.cfg"))
	if err != nil {
		return pyEnv{}, fmt.Errorf("the project's virtualenv %s: %w", venv, err)
	}
	var tried []string
	base := ""
	for _, c := range []string{cfg["executable"], filepath.Join(cfg["home"], "python3"), filepath.Join(cfg["home"], "python")} {
		if c == "" || !filepath.IsAbs(c) {
			continue
		}
		tried = append(tried, c)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			base = c
			break
		}
	}
	if base == "" {
		return pyEnv{}, fmt.Errorf("the project's virtualenv %s was made from an interpreter that is not in the sandbox (pyvenv.cfg home = %q; tried %s): the kernel mounts it only when it is a Python installation (bin/python3, lib/python3.X/os.py) outside the project and $FLUFFY_HOME; recreate the venv from such a Python (e.g. `python3 -m venv %s`), or list the interpreter's directory in the policy's toolchains section",
			venv, textsafe.Cap(cfg["home"], 256), textsafe.Cap(strings.Join(tried, ", "), 512), venv)
	}
	own := filepath.Join(j.scratch, "venv")
	if err := os.MkdirAll(filepath.Join(own, "bin"), 0o755); err != nil {
		return pyEnv{}, err
	}
	if err := os.WriteFile(filepath.Join(own, "pyvenv.cfg"), raw, 0o644); err != nil {
		return pyEnv{}, err
	}
	links := [][2]string{{base, filepath.Join(own, "bin", "python")}, {base, filepath.Join(own, "bin", "python3")}}
	for _, lib := range []string{"lib", "lib64"} {
		if _, err := os.Stat(filepath.Join(vdir, lib)); err == nil {
			links = append(links, [2]string{filepath.Join(vdir, lib), filepath.Join(own, lib)})
		}
	}
	for _, l := range links {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return pyEnv{}, err
		}
	}
	bin := filepath.Join(own, "bin")
	return pyEnv{python: filepath.Join(bin, "python"), venv: venv, base: base, bin: bin, env: []string{"VIRTUAL_ENV=" + vdir}}, nil
}

// runnerWords is what a runner that could not start said (its stderr and
// stdout since the log held mark bytes, without the command line the log
// starts each run with), last lines first kept.
func (j *job) runnerWords(mark int) string {
	b := j.log.buf.Bytes()
	if mark > len(b) {
		mark = len(b)
	}
	s := string(b[mark:])
	if strings.HasPrefix(s, "$ ") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return strings.TrimSpace(lastLines([]byte(s), 10))
}
