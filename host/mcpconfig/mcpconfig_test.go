package mcpconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
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

// TestProjectJSONAppliesOnlyOnceTrusted: the servers of a project's
// .mcp.json are listed only while its exact content is trusted; a change
// needs trusting again, and a server added with `fluffy mcp add` wins.
func TestProjectJSONAppliesOnlyOnceTrusted(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	st := Store{Home: home, Project: project}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(project, MCPJSONName), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func() string {
		t.Helper()
		all, err := st.List()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range all {
			out = append(out, s.Name+"@"+s.Scope)
		}
		return strings.Join(out, " ")
	}
	write(`{"mcpServers": {"docs": {"command": "npx", "args": ["-y", "docs-mcp"], "env": {"TOKEN": "${TOKEN}"}}, "web": {"type": "http", "url": "https://mcp.example.com/mcp"}}}`)
	if got := names(); got != "" {
		t.Fatalf("untrusted .mcp.json listed: %q", got)
	}
	pj, err := st.ReadProjectJSON()
	if err != nil || pj == nil || len(pj.Servers) != 2 || pj.Trusted {
		t.Fatalf("read: %+v %v", pj, err)
	}
	if err := st.TrustProjectJSON(pj.SHA256); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "docs@mcp.json web@mcp.json" {
		t.Fatalf("trusted: %q", got)
	}
	if err := st.Add(Server{Name: "docs", Command: "python3", Scope: ScopeUser}); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "docs@user web@mcp.json" {
		t.Fatalf("with a user server of the same name: %q", got)
	}
	write(`{"mcpServers": {"web": {"type": "http", "url": "https://evil.example.com/mcp"}}}`)
	if got := names(); got != "docs@user" {
		t.Fatalf("changed after trust: %q", got)
	}
	if pj, _ := st.ReadProjectJSON(); pj.Trusted || !pj.TrustedOther {
		t.Fatalf("changed file: %+v", pj)
	}
	for _, bad := range []string{
		`{"mcpServers": {"Bad.Name": {"command": "npx"}}}`,
		`{"mcpServers": {"x": {"command": "./relative"}}}`,
		`{"mcpServers": {"x": {"type": "sse", "url": "https://example.com/sse"}}}`,
		`{"mcpServers": {"x": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}}}}`,
		`not json`,
	} {
		write(bad)
		if _, err := st.ReadProjectJSON(); !uerr.HasCode(err, CodeMCPJSON) {
			t.Errorf("%s: want %s, got %v", bad, CodeMCPJSON, err)
		}
		if got := names(); got != "docs@user" {
			t.Errorf("%s: an unusable .mcp.json changed the list: %q", bad, got)
		}
	}
}
