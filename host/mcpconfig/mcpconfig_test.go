package mcpconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/uerr"
)

func TestValidate(t *testing.T) {
	home, project, other := t.TempDir(), t.TempDir(), t.TempDir()
	prog := filepath.Join(other, "server")
	inHome := filepath.Join(home, "server")
	inProject := filepath.Join(project, "server")
	for _, p := range []string{prog, inHome, inProject} {
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		s    Server
		ok   bool
	}{
		{"absolute program", Server{Name: "docs", Command: prog, Args: []string{"--x"}}, true},
		{"toolchain program", Server{Name: "py", Command: "python3", Args: []string{"/workspace/s.py"}}, true},
		{"network endpoint", Server{Name: "gh", Command: "npx", Network: []string{"api.github.com:443"}}, true},
		{"env", Server{Name: "e", Command: prog, Env: map[string]string{"TOKEN": "x"}}, true},
		{"upper-case name", Server{Name: "Docs", Command: prog}, false},
		{"dotted name", Server{Name: "a.b", Command: prog}, false},
		{"no command", Server{Name: "x"}, false},
		{"relative path", Server{Name: "x", Command: "./server"}, false},
		{"unclean path", Server{Name: "x", Command: other + "/../" + filepath.Base(other) + "/server"}, false},
		{"missing program", Server{Name: "x", Command: filepath.Join(other, "nope")}, false},
		{"a directory", Server{Name: "x", Command: other}, false},
		{"in the home", Server{Name: "x", Command: inHome}, false},
		{"in the project", Server{Name: "x", Command: inProject}, false},
		{"FLUFFY_ variable", Server{Name: "x", Command: prog, Env: map[string]string{"FLUFFY_HOME": "/"}}, false},
		{"PLUGIN_ variable", Server{Name: "x", Command: prog, Env: map[string]string{"PLUGIN_PROTOCOL_VERSIONS": "1"}}, false},
		{"bad variable name", Server{Name: "x", Command: prog, Env: map[string]string{"A-B": "1"}}, false},
		{"endpoint without port", Server{Name: "x", Command: prog, Network: []string{"api.github.com"}}, false},
		{"endpoint with scheme", Server{Name: "x", Command: prog, Network: []string{"https://api.github.com:443"}}, false},
		{"https URL", Server{Name: "web", URL: "https://mcp.example.com/mcp"}, true},
		{"http URL with port", Server{Name: "web", URL: "http://127.0.0.1:8080/mcp"}, true},
		{"ftp URL", Server{Name: "web", URL: "ftp://example.com/"}, false},
		{"URL with credentials", Server{Name: "web", URL: "https://u:p@example.com/"}, false},
		{"URL and command", Server{Name: "web", URL: "https://example.com/", Command: prog}, false},
		{"URL and env", Server{Name: "web", URL: "https://example.com/", Env: map[string]string{"A": "b"}}, false},
		{"negative timeout", Server{Name: "x", Command: prog, TimeoutSeconds: -1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.s, home, project)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && (err == nil || !uerr.HasCode(err, CodeInvalid)) {
				t.Fatalf("want %s, got %v", CodeInvalid, err)
			}
		})
	}
}

// TestStoreScopes: project entries shadow the user's by name, the files
// live under the home (never the project), and remove finds the entry.
func TestStoreScopes(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	st := Store{Home: home, Project: project}
	for _, s := range []Server{
		{Name: "docs", Command: "python3", Args: []string{"user.py"}, Scope: ScopeUser, Env: map[string]string{"TOKEN": "secret-1"}},
		{Name: "docs", Command: "python3", Args: []string{"project.py"}, Scope: ScopeProject},
		{Name: "db", Command: "node", Scope: ScopeUser},
	} {
		if err := st.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Add(Server{Name: "db", Command: "node", Scope: ScopeUser}); !uerr.HasCode(err, CodeExists) {
		t.Fatalf("adding db twice: %v", err)
	}
	all, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "db" || all[1].Name != "docs" || all[1].Args[0] != "project.py" || all[1].Scope != ScopeProject {
		t.Fatalf("list: %+v", all)
	}
	if entries, _ := os.ReadDir(project); len(entries) != 0 {
		t.Fatalf("the project tree was written: %v", entries)
	}
	if fi, err := os.Stat(st.UserFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("user file: %v %v", fi, err)
	}
	// Another project does not see this project's servers.
	other, err := Store{Home: home, Project: t.TempDir()}.List()
	if err != nil || len(other) != 2 || other[1].Args[0] != "user.py" {
		t.Fatalf("another project's list: %+v %v", other, err)
	}
	if from, err := st.Remove("docs", ""); err != nil || from != ScopeProject {
		t.Fatalf("remove: %q %v", from, err)
	}
	if s, err := st.Get("docs"); err != nil || s.Scope != ScopeUser || !strings.Contains(string(s.ConfigJSON()), "secret-1") {
		t.Fatalf("after removing the project's docs: %+v %v", s, err)
	}
	if _, err := st.Remove("nope", ""); !uerr.HasCode(err, CodeNotFound) {
		t.Fatalf("remove nope: %v", err)
	}
}
