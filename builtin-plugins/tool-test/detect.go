package main

import (
	"os"
	"path"
)

// detectRunner picks the runner from the files in dir (project-relative,
// under root) or, failing that, the project root: go.mod → go;
// pyproject.toml, pytest.ini, setup.cfg, tox.ini, conftest.py or a test_*.py
// → pytest; package.json → node; Cargo.toml → cargo. "" when none fits.
func detectRunner(root *os.Root, dir string) string {
	for _, d := range []string{dir, "."} {
		if r := detectIn(root, d); r != "" {
			return r
		}
		if d == "." {
			break
		}
	}
	return ""
}

func detectIn(root *os.Root, dir string) string {
	has := func(name string) bool {
		st, err := root.Lstat(path.Join(dir, name))
		return err == nil && st.Mode().IsRegular()
	}
	switch {
	case has("go.mod"):
		return "go"
	case has("pyproject.toml"), has("pytest.ini"), has("conftest.py"), has("setup.cfg"), has("tox.ini"):
		return "pytest"
	case has("package.json"):
		return "node"
	case has("Cargo.toml"):
		return "cargo"
	}
	f, err := root.Open(dir)
	if err != nil {
		return ""
	}
	defer f.Close()
	names, _ := f.Readdirnames(2000)
	for _, n := range names {
		if ok, _ := path.Match("test_*.py", n); ok {
			return "pytest"
		}
		if ok, _ := path.Match("*_test.py", n); ok {
			return "pytest"
		}
	}
	return ""
}
