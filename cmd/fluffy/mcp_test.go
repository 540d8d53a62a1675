package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPCommands: add, list, remove through the CLI; the server's
// arguments after -- are kept as given (even those that look like flags),
// environment values are never printed, and what is not supported yet is
// refused with a structured error.
func TestMCPCommands(t *testing.T) {
	c := newCLI(t)
	project := t.TempDir()
	prog := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(prog, []byte("#!/usr/bin/python3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := c.run("mcp", "add", "docs", "--project", project, "--env", "TOKEN=s3cret-value", "--", prog, "--verbose", "-x")
	if code != 0 {
		t.Fatalf("add: %d %s %s", code, out, errOut)
	}
	if _, _, code := c.run("mcp", "add", "tools", "--scope", "user", "--project", project, "--", "python3", "/workspace/srv.py"); code != 0 {
		t.Fatal("add a user-scoped server failed")
	}
	if out, errOut, code := c.run("mcp", "add", "web", "--project", project, "--url", "https://mcp.example.com/mcp"); code != 0 {
		t.Fatalf("add --url: %d %s %s", code, out, errOut)
	}
	out, _, code = c.run("mcp", "list", "--project", project)
	if !strings.Contains(out, "https://mcp.example.com/mcp") {
		t.Fatalf("list does not show the URL server:\n%s", out)
	}
	if code != 0 || !strings.Contains(out, "docs") || !strings.Contains(out, "TOKEN") || !strings.Contains(out, "tools") || strings.Contains(out, "s3cret") {
		t.Fatalf("list (%d):\n%s", code, out)
	}
	out, _, _ = c.run("mcp", "list", "--project", project, "--json")
	var first struct {
		Name, Command, Scope string
		Args                 []string
		EnvNames             []string `json:"env_names"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if first.Name != "docs" || first.Command != prog || strings.Join(first.Args, " ") != "--verbose -x" || first.Scope != "project" || strings.Contains(out, "s3cret") {
		t.Fatalf("list --json: %s", out)
	}
	for _, bad := range []struct {
		args []string
		code string
	}{
		{[]string{"mcp", "add", "web", "--project", project, "--url", "ftp://example.com/mcp"}, "MCP_SERVER_INVALID"},
		{[]string{"mcp", "add", "web", "--project", project, "--url", "https://user:pw@example.com/mcp"}, "MCP_SERVER_INVALID"},
		{[]string{"mcp", "add", "web", "--project", project, "--url", "https://example.com/mcp", "--env", "A=b"}, "MCP_SERVER_INVALID"},
		{[]string{"mcp", "add", "web", "--project", project, "--url", "https://example.com/mcp", "--", prog}, "USAGE"},
		{[]string{"mcp", "add", "docs", "--project", project, "--", prog}, "MCP_SERVER_EXISTS"},
		{[]string{"mcp", "add", "x", "--project", project, "--", "./relative"}, "MCP_SERVER_INVALID"},
		{[]string{"mcp", "add", "x", "--project", project, "--network", "example.com", "--", prog}, "MCP_SERVER_INVALID"},
		{[]string{"mcp", "add", "x", "--project", project, prog}, "USAGE"},
		{[]string{"mcp", "remove", "nope", "--project", project}, "MCP_SERVER_NOT_FOUND"},
	} {
		_, errOut, code := c.run(bad.args...)
		if code == 0 || !strings.Contains(errOut, bad.code) {
			t.Errorf("%v: exit %d, want %s:\n%s", bad.args, code, bad.code, errOut)
		}
	}
	if _, _, code := c.run("mcp", "remove", "docs", "--project", project); code != 0 {
		t.Fatal("remove failed")
	}
	out, _, _ = c.run("mcp", "list", "--project", project)
	if strings.Contains(out, "docs") || !strings.Contains(out, "tools") {
		t.Fatalf("after remove:\n%s", out)
	}
	if entries, _ := os.ReadDir(project); len(entries) != 0 {
		t.Fatalf("the project tree was written: %v", entries)
	}

	// A .mcp.json applies only once trusted, and only as it was shown.
	if err := os.WriteFile(filepath.Join(project, ".mcp.json"), []byte(`{"mcpServers": {"fromrepo": {"command": "npx", "args": ["-y", "srv"], "env": {"KEY": "v"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ = c.run("mcp", "list", "--project", project)
	if strings.Contains(out, "fromrepo") || !strings.Contains(errOut, "mcp trust") {
		t.Fatalf("untrusted .mcp.json: %s / %s", out, errOut)
	}
	if _, errOut, code := c.run("mcp", "trust", "--project", project); code == 0 || !strings.Contains(errOut, "MCP_TRUST_REVIEW_REQUIRED") {
		t.Fatalf("trust without a terminal or --yes: %d %s", code, errOut)
	}
	if out, _, code := c.runIn("n\n", true, "mcp", "trust", "--project", project); code == 0 || !strings.Contains(out, "npx -y srv") || !strings.Contains(out, "KEY") {
		t.Fatalf("trust answered no: %d %s", code, out)
	}
	if out, errOut, code := c.runIn("y\n", true, "mcp", "trust", "--project", project); code != 0 {
		t.Fatalf("trust answered yes: %d %s %s", code, out, errOut)
	}
	if out, _, _ := c.run("mcp", "list", "--project", project); !strings.Contains(out, "fromrepo") || !strings.Contains(out, "mcp.json") {
		t.Fatalf("trusted .mcp.json not listed:\n%s", out)
	}
}
