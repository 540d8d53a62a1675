package brief

import (
	"fmt"
	"io/fs"
	"strings"
)

// Language is one language recognised by a marker file at the project's
// root, with the runner test.run uses for it.
type Language struct {
	Name, Marker, Runner string
}

// knownLanguages are checked in order; a language is listed once, for its
// first marker found.
var knownLanguages = []Language{
	{"Go", "go.mod", "go test"},
	{"Python", "pyproject.toml", "pytest"},
	{"Python", "setup.py", "pytest"},
	{"Python", "pytest.ini", "pytest"},
	{"Python", "setup.cfg", "pytest"},
	{"Node", "package.json", "node --test"},
	{"Rust", "Cargo.toml", "cargo test"},
}

// DetectLanguages lists the languages whose marker is a regular file at
// the root of fsys.
func DetectLanguages(fsys fs.FS) []Language {
	var out []Language
	seen := map[string]bool{}
	for _, l := range knownLanguages {
		if seen[l.Name] {
			continue
		}
		if fi, err := fs.Stat(fsys, l.Marker); err == nil && fi.Mode().IsRegular() {
			seen[l.Name] = true
			out = append(out, l)
		}
	}
	return out
}

// String is the language as the brief lists it.
func (l Language) String() string {
	return fmt.Sprintf("%s (%s; tests run with %s)", l.Name, l.Marker, l.Runner)
}

// Branch reads the current branch from .git/HEAD ("" when detached or not
// a git repository).
func Branch(fsys fs.FS) string {
	data, err := fs.ReadFile(fsys, ".git/HEAD")
	if err != nil || len(data) > 512 {
		return ""
	}
	const ref = "ref: refs/heads/"
	s := string(data)
	if len(s) > len(ref) && s[:len(ref)] == ref {
		return clean1(strings.TrimSpace(s[len(ref):]))
	}
	return ""
}
